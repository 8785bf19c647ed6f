package jetstream

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Ack sampling (a consumer's sample_freq, "N" or "N%"): for that share of
// acknowledged messages, an ack metric is published on
// $JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer> with the time from
// delivery to acknowledgement, as nats-server does for explicit acks.

const metricAckPrefix = "$JS.EVENT.METRIC.CONSUMER.ACK."

// sampleFreq reads sample_freq: 0 (none) to 100 (every ack).
func sampleFreq(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, errors.New("negative sampling frequency")
	}
	return min(n, 100), nil
}

func errInvalidSampling(err error) *APIError {
	return apiErr(400, 10095, fmt.Sprintf("failed to parse consumer sampling configuration: %v", err))
}

// ackMetric is the schema io.nats.jetstream.metric.v1.consumer_ack.
type ackMetric struct {
	typedEvent
	Stream      string `json:"stream"`
	Consumer    string `json:"consumer"`
	ConsumerSeq uint64 `json:"consumer_seq"`
	StreamSeq   uint64 `json:"stream_seq"`
	AckTime     int64  `json:"ack_time"` // nanoseconds from delivery to ack
	Deliveries  uint64 `json:"deliveries"`
}

// sampleAckLocked publishes the ack metric of a pending message being
// acknowledged, if the sampling picks it. mu held.
func (c *consumer) sampleAckLocked(a *ackMsg, now time.Time) {
	freq, _ := sampleFreq(c.cfg.SampleFrequency)
	if freq <= 0 || c.cfg.AckPolicy != AckExplicit {
		return
	}
	p, ok := c.pending[a.sseq]
	if !ok || (freq < 100 && rand.IntN(100) >= freq) {
		return
	}
	c.st.ja.advise(metricAckPrefix+c.st.name+"."+c.name, func() any {
		e := newEvent("")
		e.Type = "io.nats.jetstream.metric.v1.consumer_ack"
		return ackMetric{typedEvent: e, Stream: c.st.name, Consumer: c.name, ConsumerSeq: a.dseq,
			StreamSeq: a.sseq, AckTime: now.UnixNano() - p.ts, Deliveries: a.dc}
	})
}
