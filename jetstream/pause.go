package jetstream

import "time"

// A consumer may be paused until a time (pause_until, as in nats-server
// 2.11 and later): it delivers nothing, redeliveries included,
// until then; acks, pull requests (which wait or expire as usual) and
// heartbeats go on. It is set in the configuration at create or update, or
// with $JS.API.CONSUMER.PAUSE.<stream>.<consumer> {"pause_until": t}; an
// empty or past time resumes. Each change, and the pause running out, is
// advised on $JS.EVENT.ADVISORY.CONSUMER.PAUSE.<stream>.<consumer>.

const advConsumerPause = advisoryPrefix + "CONSUMER.PAUSE."

type consumerPause struct {
	typedEvent
	Stream     string    `json:"stream"`
	Consumer   string    `json:"consumer"`
	Paused     bool      `json:"paused"`
	PauseUntil time.Time `json:"pause_until,omitempty"`
}

type pauseRequest struct {
	PauseUntil time.Time `json:"pause_until"`
}

type pauseResponse struct {
	apiResponse
	Paused         bool          `json:"paused"`
	PauseUntil     time.Time     `json:"pause_until"`
	PauseRemaining time.Duration `json:"pause_remaining,omitempty"`
}

// pausedUntilLocked returns the end of the consumer's pause, if it is paused at
// now. mu held.
func (c *consumer) pausedUntilLocked(now time.Time) (time.Time, bool) {
	if p := c.cfg.PauseUntil; p != nil && now.Before(*p) {
		return *p, true
	}
	return time.Time{}, false
}

// pauseChangedLocked advises a new pause_until, and remembers a pause in the
// future to advise its end. mu held.
func (c *consumer) pauseChangedLocked(old *time.Time, now time.Time) {
	var was, is time.Time
	if old != nil {
		was = *old
	}
	if c.cfg.PauseUntil != nil {
		is = *c.cfg.PauseUntil
	}
	if was.Equal(is) {
		return
	}
	c.advisePause(is, now)
	c.pauseEnd = time.Time{}
	if now.Before(is) {
		c.pauseEnd = is
	}
}

// housekeepPauseLocked advises the end of a pause once it ran out and returns
// when it ends, if it has not. mu held.
func (c *consumer) housekeepPauseLocked(now time.Time) time.Time {
	if c.pauseEnd.IsZero() {
		return time.Time{}
	}
	if now.Before(c.pauseEnd) {
		return c.pauseEnd
	}
	c.advisePause(c.pauseEnd, now)
	c.pauseEnd = time.Time{}
	return time.Time{}
}

func (c *consumer) advisePause(until, now time.Time) {
	c.st.ja.advise(advConsumerPause+c.st.name+"."+c.name, func() any {
		return consumerPause{typedEvent: newEvent("consumer_pause"), Stream: c.st.name, Consumer: c.name,
			Paused: now.Before(until), PauseUntil: until}
	})
}

// consumerPause answers CONSUMER.PAUSE: it updates pause_until as a
// configuration update would, persisted with the configuration.
func (ja *jsAccount) consumerPause(streamName, name string, data []byte) any {
	r := &pauseResponse{apiResponse: newResponse("consumer_pause")}
	var req pauseRequest
	st, aerr := ja.streamRequest(streamName, data, &req)
	if aerr == nil {
		aerr = st.notLeading()
	}
	if aerr != nil {
		r.Error = aerr
		return r
	}
	until := req.PauseUntil.UTC()
	if st.repl != nil && st.repl.fsm.cons.has(name) {
		r.Error = st.repl.pauseConsumer(name, until) // through the group
	} else {
		r.Error = st.pauseConsumer(name, until)
	}
	if r.Error != nil {
		return r
	}
	now := time.Now()
	r.PauseUntil = until
	if r.Paused = now.Before(until); r.Paused {
		r.PauseRemaining = until.Sub(now)
	}
	return r
}

// pauseConsumer sets a consumer's pause_until (zero: none), persisted with
// its configuration. Under the stream's lock, as addConsumer updates, so
// that a consumer deleted meanwhile (after inactivity) is not written
// back.
func (st *stream) pauseConsumer(name string, until time.Time) *APIError {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.mu.consumers[name]
	if c == nil {
		return errConsumerNotFound()
	}
	if err := c.update(pausedConfig(c.config(), until), c.principal()); err != nil {
		return apiErr(500, 10104, err.Error())
	}
	return nil
}

// pausedConfig is cfg paused until (zero: not paused).
func pausedConfig(cfg ConsumerConfig, until time.Time) ConsumerConfig {
	cfg.PauseUntil = nil
	if !until.IsZero() {
		cfg.PauseUntil = &until
	}
	return cfg
}
