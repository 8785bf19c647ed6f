package jetstream

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/skiffmq/skiff/store"
)

// $JS.API.CONSUMER.RESET.<stream>.<consumer> {"seq": N} moves a consumer
// back (or forward) to deliver from stream sequence N, forgetting what it
// delivered and what waited for acknowledgements, as nats-server 2.14's:
// without a body (or seq 0) it goes back to its ack floor, redelivering
// everything unacknowledged. A sequence other than the ack floor's is only
// allowed for deliver policy all, and for by_start_sequence and
// by_start_time at or after the configured start; otherwise 10204
// "invalid reset: not allowed". The answer is the consumer's info with
// reset_seq.

type resetRequest struct {
	Seq uint64 `json:"seq"`
}

type resetResponse struct {
	apiResponse
	*ConsumerInfo
	ResetSeq uint64 `json:"reset_seq"`
}

func errInvalidReset(err error) *APIError { return apiErr(400, 10204, "invalid reset: "+err.Error()) }

// consumerReset answers CONSUMER.RESET.
func (ja *jsAccount) consumerReset(streamName, name string, data []byte) any {
	r := &resetResponse{apiResponse: newResponse("consumer_reset")}
	var req resetRequest
	if len(data) > 0 {
		if err := json.Unmarshal(data, &req); err != nil {
			r.Error = errInvalidJSON(err)
			return r
		}
	}
	// The reference server answers on each consumer's own subscription:
	// for a missing one nobody answers, and the requester times out.
	st := ja.lookup(streamName)
	if st == nil {
		return noAnswer{}
	}
	c := st.consumer(name)
	if c == nil {
		return noAnswer{}
	}
	seq, err := c.reset(req.Seq)
	if err != nil {
		r.Error = errInvalidReset(err)
		return r
	}
	r.ConsumerInfo, r.ResetSeq = c.info(), seq
	return r
}

// reset moves the consumer to deliver from seq (0: its ack floor) and
// returns the sequence it starts from.
func (c *consumer) reset(seq uint64) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, errors.New("consumer closed")
	}
	switch {
	case seq == 0:
		seq = c.asflr + 1
	case c.cfg.DeliverPolicy == DeliverAll:
	case c.cfg.DeliverPolicy == DeliverByStartSequence:
		if seq < c.cfg.OptStartSeq {
			return 0, errors.New("below start seq")
		}
	case c.cfg.DeliverPolicy == DeliverByStartTime:
		if seq < c.st.seqAtTime(*c.cfg.OptStartTime) {
			return 0, errors.New("below start time")
		}
	default:
		return 0, errors.New("not allowed")
	}
	seq = max(seq, 1)
	if err := c.log.Reset(seq-1, 0); err != nil {
		return 0, err
	}
	c.pending = map[uint64]*pendingMsg{}
	c.deadlines = c.deadlines[:0]
	c.rdc = map[uint64]uint64{}
	c.rdq, c.rdqSet = nil, map[uint64]struct{}{}
	c.lss, c.lssResume = nil, 0
	c.sseq, c.dseq = seq, 0
	c.asflr, c.adflr = seq-1, 0
	c.lastDelivered, c.lastAcked = time.Time{}, time.Time{}
	c.replay = replayState{}
	c.npcValid = false
	c.signal()
	return seq, nil
}

// Reset starts the file over: nothing delivered, the ack floor at
// (asflr, adflr), written whole as a new snapshot.
func (p *fileProgress) Reset(asflr, adflr uint64) error {
	if err := p.Flush(); err != nil {
		return err
	}
	floor := store.SeqPair{Stream: asflr, Consumer: adflr}
	err := p.cs.Update(func(s *store.ConsumerSnapshot) {
		*s = store.ConsumerSnapshot{Delivered: floor, AckFloor: floor}
	})
	if err != nil {
		return err
	}
	p.floor, p.floorDirty = floor, false
	return nil
}
