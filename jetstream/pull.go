package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/skiffmq/skiff/server"
)

// pullRequest is a waiting CONSUMER.MSG.NEXT request.
type pullRequest struct {
	reply     string
	principal server.Principal // the requester
	batch     int              // messages still wanted
	maxBytes  int              // 0: no byte limit
	bytesLeft int
	noWait    bool
	expires   time.Time // zero: never
	hb        time.Duration
	hbAt      time.Time
	delivered int
}

// nextRequest is the JSON form of a pull request.
type nextRequest struct {
	Batch     int           `json:"batch"`
	Expires   time.Duration `json:"expires"`
	MaxBytes  int           `json:"max_bytes"`
	NoWait    bool          `json:"no_wait"`
	Heartbeat time.Duration `json:"idle_heartbeat"`
}

// parsePull reads a pull request body: empty (one message), a number (a
// batch), or JSON.
func parsePull(body []byte, at time.Time) (*pullRequest, error) {
	b := bytes.TrimSpace(body)
	r := &pullRequest{batch: 1}
	switch {
	case len(b) == 0:
	case b[0] == '{':
		var nr nextRequest
		if err := json.Unmarshal(b, &nr); err != nil {
			return nil, err
		}
		if nr.Heartbeat > 0 && nr.Heartbeat*2 > nr.Expires {
			return nil, errors.New("heartbeat value too large")
		}
		r.batch, r.maxBytes, r.noWait, r.hb = nr.Batch, nr.MaxBytes, nr.NoWait, nr.Heartbeat
		if nr.Expires > 0 {
			r.expires = at.Add(nr.Expires)
		}
		if r.hb > 0 {
			r.hbAt = at.Add(r.hb)
		}
	default:
		if n, err := strconv.Atoi(string(b)); err == nil {
			r.batch = n
		}
	}
	r.batch = max(r.batch, 1)
	r.maxBytes = max(r.maxBytes, 0)
	r.bytesLeft = r.maxBytes
	return r, nil
}

// status sends a status message (headers only) to a requester.
func status(pub *server.Publisher, to string, code int, text string) {
	hb := headerBuilder{}
	pub.Publish(to, "", hb.status(code, text).bytes(), nil)
}

// statusPending sends a status message with the request's unfilled batch
// and bytes, as 408 and 409 carry them.
func statusPending(pub *server.Publisher, to string, code int, text string, r *pullRequest) {
	hb := headerBuilder{}
	hb.status(code, text)
	hb.addUint("Nats-Pending-Messages", uint64(max(r.batch, 0)))
	hb.addUint("Nats-Pending-Bytes", uint64(max(r.bytesLeft, 0)))
	pub.Publish(to, "", hb.bytes(), nil)
}

// addRequestLocked checks a pull request and queues it. mu held.
func (c *consumer) addRequestLocked(pub *server.Publisher, m pullMsg, now time.Time) {
	if !c.isPull() {
		status(pub, m.reply, 409, "Consumer is push based")
		return
	}
	r, err := parsePull(m.body, m.at)
	if err != nil {
		status(pub, m.reply, 400, "Bad Request - "+err.Error())
		return
	}
	r.reply, r.principal = m.reply, m.principal
	switch {
	case c.cfg.MaxRequestBatch > 0 && r.batch > c.cfg.MaxRequestBatch:
		status(pub, m.reply, 409, fmt.Sprintf("Exceeded MaxRequestBatch of %d", c.cfg.MaxRequestBatch))
		return
	case !r.expires.IsZero() && c.cfg.MaxRequestExpires > 0 && r.expires.After(m.at.Add(c.cfg.MaxRequestExpires)):
		status(pub, m.reply, 409, fmt.Sprintf("Exceeded MaxRequestExpires of %v", c.cfg.MaxRequestExpires))
		return
	case r.maxBytes > 0 && c.cfg.MaxRequestMaxBytes > 0 && r.maxBytes > c.cfg.MaxRequestMaxBytes:
		status(pub, m.reply, 409, fmt.Sprintf("Exceeded MaxRequestMaxBytes of %v", c.cfg.MaxRequestMaxBytes))
		return
	}
	c.lastActive = now
	if len(c.waiting) >= c.cfg.MaxWaiting {
		c.housekeepPullLocked(pub, now)
		c.dropUninterestedLocked()
	}
	if r.noWait {
		avail := c.numPendingLocked() + int64(len(c.rdqSet))
		if avail == 0 && r.expires.IsZero() {
			status(pub, m.reply, 404, "No Messages")
			return
		}
		if avail > 0 {
			var wanted int64
			for _, w := range c.waiting {
				wanted += int64(w.batch)
			}
			if avail < wanted {
				status(pub, m.reply, 408, "Requests Pending")
				return
			}
		}
	}
	if len(c.waiting) >= c.cfg.MaxWaiting {
		// A client with heartbeats waits for them to stop instead of
		// retrying in a loop, as the reference server expects.
		if r.hb == 0 {
			status(pub, m.reply, 409, "Exceeded MaxWaiting")
		}
		return
	}
	c.waiting = append(c.waiting, r)
}

// pickRequestLocked returns the request the next message of the given size goes
// to, first in line, dropping requests that expired, lost their
// requester, or cannot take a message that large. mu held.
func (c *consumer) pickRequestLocked(pub *server.Publisher, size int, now time.Time) *pullRequest {
	acc := c.st.ja.acc
	for len(c.waiting) > 0 {
		r := c.waiting[0]
		switch {
		case !r.expires.IsZero() && !now.Before(r.expires):
			statusPending(pub, r.reply, 408, "Request Timeout", r)
		case !acc.HasInterest(r.reply):
		case r.maxBytes > 0 && size > r.bytesLeft:
			statusPending(pub, r.reply, 409, "Message Size Exceeds MaxBytes", r)
		default:
			return r
		}
		c.waiting[0] = nil
		c.waiting = c.waiting[1:]
	}
	return nil
}

// servedLocked accounts a message delivered to r, the head of the line: a
// finished request leaves, an unfinished one goes to the back, so that
// waiting requests share messages in turn. mu held.
func (c *consumer) servedLocked(pub *server.Publisher, r *pullRequest, size int, now time.Time) {
	r.batch--
	r.delivered++
	if r.maxBytes > 0 {
		r.bytesLeft -= size
		if r.bytesLeft <= 0 {
			r.batch = 0
		}
	}
	if r.hb > 0 {
		r.hbAt = now.Add(r.hb)
	}
	c.waiting[0] = nil
	c.waiting = c.waiting[1:]
	if r.batch > 0 {
		c.waiting = append(c.waiting, r)
		return
	}
	if r.maxBytes > 0 && r.bytesLeft > 0 {
		statusPending(pub, r.reply, 409, "Batch Completed", r)
	}
}

// endOfStreamLocked answers no_wait requests once nothing is left to deliver:
// 404 unless they still wait for their expiry with nothing delivered.
// mu held.
func (c *consumer) endOfStreamLocked(pub *server.Publisher) {
	if !c.isPull() {
		return
	}
	keep := c.waiting[:0]
	for _, r := range c.waiting {
		if r.noWait && (r.expires.IsZero() || r.delivered > 0) {
			status(pub, r.reply, 404, "No Messages")
			continue
		}
		keep = append(keep, r)
	}
	clear(c.waiting[len(keep):])
	c.waiting = keep
}

// housekeepPullLocked times out expired requests, sends their idle heartbeats,
// and every second drops requests nobody listens to any more. It returns
// the next time it has something to do. mu held.
func (c *consumer) housekeepPullLocked(pub *server.Publisher, now time.Time) time.Time {
	if now.Sub(c.sweptAt) >= time.Second {
		c.sweptAt = now
		c.dropUninterestedLocked()
	}
	var wake time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	keep := c.waiting[:0]
	for _, r := range c.waiting {
		if !r.expires.IsZero() && !now.Before(r.expires) {
			statusPending(pub, r.reply, 408, "Request Timeout", r)
			continue
		}
		if r.hb > 0 && !now.Before(r.hbAt) {
			pub.Publish(r.reply, "", c.idleHeartbeatLocked(), nil)
			r.hbAt = now.Add(r.hb)
		}
		soonest(r.expires)
		if r.hb > 0 {
			soonest(r.hbAt)
		}
		keep = append(keep, r)
	}
	clear(c.waiting[len(keep):])
	c.waiting = keep
	if len(c.waiting) > 0 {
		soonest(now.Add(time.Second))
	}
	return wake
}

// dropUninterestedLocked removes requests whose reply subject has no subscriber.
func (c *consumer) dropUninterestedLocked() {
	acc := c.st.ja.acc
	keep := c.waiting[:0]
	for _, r := range c.waiting {
		if acc.HasInterest(r.reply) {
			keep = append(keep, r)
		}
	}
	clear(c.waiting[len(keep):])
	c.waiting = keep
}
