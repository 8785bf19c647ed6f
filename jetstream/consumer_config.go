package jetstream

import (
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/skiffmq/skiff/subject"
)

// Consumer defaults, as the reference server's.
const (
	// DefaultInactiveThreshold is how long an ephemeral consumer lives
	// without a subscriber (push) or a pull request (pull).
	DefaultInactiveThreshold = 5 * time.Second
	maxDescriptionLen        = 4 * 1024
	maxNameLen               = 255
)

// normalizeConsumer fills a consumer configuration's defaults and checks
// it against its stream's, in the order of the reference server's checks,
// so that a bad configuration gets the same error from both. accMaxAck is
// the account's max_ack_pending (noLimit for none).
func normalizeConsumer(cfg ConsumerConfig, scfg *StreamConfig, accMaxAck int) (ConsumerConfig, *APIError) {
	if cfg.MaxDeliver == 0 || cfg.MaxDeliver < -1 {
		cfg.MaxDeliver = -1
	}
	cfg.MaxWaiting = max(cfg.MaxWaiting, 0)
	if cfg.MaxAckPending < -1 {
		cfg.MaxAckPending = -1
	}
	cfg.MaxRequestBatch = max(cfg.MaxRequestBatch, 0)
	cfg.MaxRequestExpires = max(cfg.MaxRequestExpires, 0)
	cfg.MaxRequestMaxBytes = max(cfg.MaxRequestMaxBytes, 0)
	cfg.Heartbeat = max(cfg.Heartbeat, 0)
	if cfg.PauseUntil != nil {
		if cfg.PauseUntil.IsZero() {
			cfg.PauseUntil = nil
		} else {
			utc := cfg.PauseUntil.UTC()
			cfg.PauseUntil = &utc
		}
	}
	cfg.InactiveThreshold = max(cfg.InactiveThreshold, 0)
	if cfg.DeliverSubject == "" && cfg.MaxWaiting == 0 {
		cfg.MaxWaiting = DefaultMaxWaiting
	}
	if cfg.AckWait == 0 && cfg.AckPolicy != AckNone {
		cfg.AckWait = DefaultAckWait
	}
	if len(cfg.BackOff) > 0 {
		cfg.AckWait = cfg.BackOff[0]
	}
	if cfg.MaxAckPending == 0 {
		cfg.MaxAckPending = scfg.ConsumerLimits.MaxAckPending
	}
	if cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = scfg.ConsumerLimits.InactiveThreshold
	}
	if cfg.MaxAckPending == 0 && cfg.AckPolicy != AckNone {
		cfg.MaxAckPending = DefaultMaxAckPending
		if accMaxAck > 0 && accMaxAck < cfg.MaxAckPending {
			cfg.MaxAckPending = accMaxAck
		}
	}
	if cfg.Durable == "" && cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = DefaultInactiveThreshold
	}

	if cfg.Name != "" && !validAssetName(cfg.Name) {
		return cfg, errStreamConfig(errors.New(`consumer name can not contain '.', '*', '>', '\', '/'`))
	}
	if cfg.Durable != "" && !validAssetName(cfg.Durable) {
		return cfg, errStreamConfig(errors.New(`consumer durable name can not contain '.', '*', '>', '\', '/'`))
	}
	if len(cfg.Name) > maxNameLen || len(cfg.Durable) > maxNameLen {
		return cfg, apiErr(400, 10102, fmt.Sprintf("consumer name is too long, maximum allowed is %d", maxNameLen))
	}
	if cfg.Replicas > max(scfg.Replicas, 1) {
		return cfg, apiErr(400, 10126, "consumer config replica count exceeds parent stream")
	}
	if cfg.Replicas < 0 {
		return cfg, apiErr(400, 10133, "replicas count cannot be negative")
	}
	for _, b := range cfg.BackOff {
		if b < 0 {
			return cfg, apiErr(400, 10184, "consumer backoff needs to be positive")
		}
	}
	if cfg.AckWait < 0 {
		return cfg, apiErr(400, 10183, "consumer ack wait needs to be positive")
	}
	if n := len(cfg.BackOff); n > 0 && cfg.MaxDeliver != -1 && n > cfg.MaxDeliver {
		return cfg, errConsumerMaxDeliverBackoff()
	}
	if len(cfg.Description) > maxDescriptionLen {
		return cfg, apiErr(400, 10107, fmt.Sprintf("consumer description is too long, maximum allowed is %d", maxDescriptionLen))
	}
	if cfg.DeliverSubject != "" {
		if !subject.IsLiteral(cfg.DeliverSubject) {
			return cfg, errConsumerDeliverWildcards()
		}
		if subject.ValidateLiteral(cfg.DeliverSubject) != nil {
			return cfg, apiErr(400, 10112, "invalid push consumer deliver subject")
		}
		for _, s := range scfg.Subjects {
			if subject.Match(s, cfg.DeliverSubject) {
				return cfg, apiErr(400, 10081, "consumer deliver subject forms a cycle")
			}
		}
		if cfg.MaxWaiting != 0 {
			return cfg, errConsumerPushMaxWaiting()
		}
		if cfg.MaxAckPending > 0 && cfg.AckPolicy == AckNone {
			return cfg, apiErr(400, 10082, "consumer requires ack policy for max ack pending")
		}
		if cfg.Heartbeat > 0 && cfg.Heartbeat < 100*time.Millisecond {
			return cfg, errConsumerSmallHeartbeat()
		}
		if cfg.FlowControl && cfg.Heartbeat == 0 {
			return cfg, errConsumerFCNeedsHeartbeat()
		}
	} else {
		if cfg.AckPolicy == AckNone && scfg.Retention == WorkQueuePolicy {
			return cfg, apiErr(400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream")
		}
		if cfg.RateLimit > 0 {
			return cfg, apiErr(400, 10086, "consumer in pull mode can not have rate limit set")
		}
		if cfg.Heartbeat > 0 {
			return cfg, errConsumerHBRequiresPush()
		}
		if cfg.FlowControl {
			return cfg, errConsumerFCRequiresPush()
		}
		if cfg.MaxRequestExpires != 0 && cfg.MaxRequestExpires < time.Millisecond {
			return cfg, apiErr(400, 10115, "consumer max request expires needs to be >= 1ms")
		}
	}
	if cfg.MaxAckPending > MaxAckPendingLimit {
		return cfg, apiErr(400, 10121, fmt.Sprintf("consumer max ack pending exceeds system limit of %d", MaxAckPendingLimit))
	}
	if accMaxAck > 0 && cfg.MaxAckPending > accMaxAck {
		return cfg, apiErr(400, 10121, fmt.Sprintf("consumer max ack pending exceeds system limit of %d", accMaxAck))
	}
	if l := scfg.ConsumerLimits.MaxAckPending; l > 0 && cfg.MaxAckPending > l {
		return cfg, apiErr(400, 10121, fmt.Sprintf("consumer max ack pending exceeds system limit of %d", l))
	}
	if l := scfg.ConsumerLimits.InactiveThreshold; l > 0 && cfg.InactiveThreshold > l {
		return cfg, apiErr(400, 10153, fmt.Sprintf("consumer inactive threshold exceeds system limit of %v", l))
	}
	if cfg.FilterSubject != "" && len(cfg.FilterSubjects) > 0 {
		return cfg, errConsumerDuplicateFilters()
	}
	for _, f := range cfg.FilterSubjects {
		if f == "" {
			return cfg, apiErr(400, 10139, "consumer filter in FilterSubjects cannot be empty")
		}
	}
	filters := cfg.filters()
	if len(filters) > MaxConsumerFilters {
		return cfg, errConsumerCreate(fmt.Errorf("too many filter subjects: %d, at most %d per consumer", len(filters), MaxConsumerFilters))
	}
	// Through an index, as a stream's subjects: comparing every pair
	// of 10,000 filters would hold the API worker for seconds.
	own := newSubjectIndex()
	for _, f := range filters {
		if subject.ValidatePattern(f) != nil {
			return cfg, errStreamConfig(errors.New("invalid subject"))
		}
		if _, _, ok := own.intersecting(f); ok {
			return cfg, errConsumerOverlappingFilters()
		}
		own.add(f, "")
	}
	if aerr := checkStart(&cfg); aerr != nil {
		return cfg, aerr
	}
	// Filters need not overlap the stream's subjects: nats-server 2.10
	// dropped that check (10093), and such a consumer has nothing to
	// deliver until the stream's subjects change.
	// What Skiff does not implement is refused, never silently ignored.
	if cfg.RateLimit > 0 {
		return cfg, errConsumerCreate(errors.New("rate_limit_bps is not supported"))
	}
	if _, err := sampleFreq(cfg.SampleFrequency); err != nil {
		return cfg, errInvalidSampling(err)
	}
	return cfg, nil
}

// checkStart checks the deliver policy against the optional start.
func checkStart(cfg *ConsumerConfig) *APIError {
	badStart := func(dp, start string) *APIError {
		return errConsumerInvalidPolicy(fmt.Errorf("consumer delivery policy is deliver %s, but optional start %s is also set", dp, start))
	}
	notSet := func(dp, what string) *APIError {
		return errConsumerInvalidPolicy(fmt.Errorf("consumer delivery policy is deliver %s, but optional %s is not set", dp, what))
	}
	switch cfg.DeliverPolicy {
	case DeliverAll, DeliverLast, DeliverNew, DeliverLastPerSubject:
		name := map[DeliverPolicy]string{DeliverAll: "all", DeliverLast: "last", DeliverNew: "new", DeliverLastPerSubject: "last per subject"}[cfg.DeliverPolicy]
		if cfg.OptStartSeq > 0 {
			return badStart(name, "sequence")
		}
		if cfg.OptStartTime != nil {
			return badStart(name, "time")
		}
		if cfg.DeliverPolicy == DeliverLastPerSubject && len(cfg.filters()) == 0 {
			return notSet(name, "filter subject")
		}
	case DeliverByStartSequence:
		if cfg.OptStartSeq == 0 {
			return notSet("by start sequence", "start sequence")
		}
		if cfg.OptStartTime != nil {
			return badStart("by start sequence", "time")
		}
	case DeliverByStartTime:
		if cfg.OptStartTime == nil {
			return notSet("by start time", "start time")
		}
		if cfg.OptStartSeq != 0 {
			return badStart("by start time", "start sequence")
		}
	}
	return nil
}

// checkUpdate says whether a consumer's configuration may change from old
// to cfg, with the reference server's texts.
func checkUpdate(old, cfg *ConsumerConfig) error {
	if reflect.DeepEqual(old, cfg) {
		return nil
	}
	switch {
	case old.DeliverPolicy != cfg.DeliverPolicy:
		return errors.New("deliver policy can not be updated")
	case old.MemoryStorage != cfg.MemoryStorage:
		return errors.New("storage type can not be updated")
	case old.OptStartSeq != cfg.OptStartSeq:
		return errors.New("start sequence can not be updated")
	case (old.OptStartTime == nil) != (cfg.OptStartTime == nil) ||
		old.OptStartTime != nil && !old.OptStartTime.Equal(*cfg.OptStartTime):
		return errors.New("start time can not be updated")
	case old.AckPolicy != cfg.AckPolicy:
		return errors.New("ack policy can not be updated")
	case old.ReplayPolicy != cfg.ReplayPolicy:
		return errors.New("replay policy can not be updated")
	case old.Heartbeat != cfg.Heartbeat:
		return errors.New("heart beats can not be updated")
	case old.FlowControl != cfg.FlowControl:
		return errors.New("flow control can not be updated")
	case old.DeliverSubject == "" && cfg.DeliverSubject != "":
		return errors.New("can not update pull consumer to push based")
	case old.DeliverSubject != "" && cfg.DeliverSubject == "":
		return errors.New("can not update push consumer to pull based")
	case old.MaxWaiting != cfg.MaxWaiting:
		return errors.New("max waiting can not be updated")
	}
	return nil
}

// filters returns the consumer's filter subjects: none means all.
func (cfg *ConsumerConfig) filters() []string {
	if cfg.FilterSubject != "" {
		return []string{cfg.FilterSubject}
	}
	return cfg.FilterSubjects
}

// validAssetName checks a stream or consumer name as the reference server
// does: no wildcards, separators, path separators or white space.
func validAssetName(name string) bool {
	return name != "" && !strings.ContainsAny(name, ".*> \t\r\n\f\\/\x00")
}

// newConsumerName returns a random name for an ephemeral consumer: eight
// characters, as the reference server's.
func newConsumerName() string { return randomID(8) }

// randomID returns n random letters and digits: consumer names, advisory
// IDs.
func randomID(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
