package jscluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Calls: a server asks another for an answer over their raft link (the
// transport's app frames): the JetStream API forwarded to the server that
// can answer it. The link is between servers of one cluster only, which
// authenticated each other on the cluster listener, so a call is a
// server's and never a client's. Each app payload is
//
//	| kind u8 | id u64 | body |   kind 1: a call, 2: its answer, 3: its failure (body: the reason)
//
// A call's handler runs on a goroutine of its own, at most maxCallsRunning
// at once per server; past that the call fails at once (ErrBusy).

const (
	appCall   = 1
	appAnswer = 2
	appFailed = 3

	appHeaderLen    = 9
	maxCallsRunning = 256
)

// Errors of calls.
var (
	// ErrCallFailed is a call the peer could not answer, with its reason.
	ErrCallFailed = errors.New("jscluster: call failed")
	// ErrBusy is a call refused because the peer runs too many already.
	ErrBusy = errors.New("jscluster: too many calls")
)

// CallHandler answers the calls of peers: from is the caller's server
// name. It may block; the answer goes back to the caller.
type CallHandler func(from string, req []byte) (answer []byte, err error)

type calls struct {
	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan callResult
	handler CallHandler
	running chan struct{}
}

type callResult struct {
	body []byte
	err  error
}

func (cs *calls) init() {
	cs.pending = map[uint64]chan callResult{}
	cs.running = make(chan struct{}, maxCallsRunning)
}

// HandleCalls sets the handler of the calls peers make to this server.
// Until it is set, calls fail.
func (c *Cluster) HandleCalls(h CallHandler) {
	c.calls.mu.Lock()
	c.calls.handler = h
	c.calls.mu.Unlock()
}

// Call sends req to the server called peer and returns its handler's
// answer. It fails if there is no link to the peer, if the peer's handler
// fails (ErrCallFailed), or with ctx; a call whose link goes down waits
// for ctx.
func (c *Cluster) Call(ctx context.Context, peer string, req []byte) ([]byte, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	cs := &c.calls
	ch := make(chan callResult, 1)
	cs.mu.Lock()
	cs.next++
	id := cs.next
	cs.pending[id] = ch
	cs.mu.Unlock()
	defer func() {
		cs.mu.Lock()
		delete(cs.pending, id)
		cs.mu.Unlock()
	}()
	if err := c.tr.SendApp(RaftID(peer), appMsg(appCall, id, req)); err != nil {
		return nil, fmt.Errorf("%w: call to %s: %w", ErrNotSent, peer, err)
	}
	select {
	case r := <-ch:
		return r.body, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.stop:
		return nil, ErrClosed
	}
}

func appMsg(kind byte, id uint64, body []byte) []byte {
	b := make([]byte, appHeaderLen, appHeaderLen+len(body))
	b[0] = kind
	binary.LittleEndian.PutUint64(b[1:], id)
	return append(b, body...)
}

// receiveApp takes an app payload from the link to server `from`, on the
// link's reader goroutine.
func (c *Cluster) receiveApp(from uint64, payload []byte) {
	if len(payload) < appHeaderLen {
		return
	}
	kind, id := payload[0], binary.LittleEndian.Uint64(payload[1:])
	body := append([]byte(nil), payload[appHeaderLen:]...)
	cs := &c.calls
	switch kind {
	case appCall:
		cs.mu.Lock()
		h := cs.handler
		cs.mu.Unlock()
		if h == nil {
			c.answer(from, id, nil, errors.New("no handler"))
			return
		}
		select {
		case cs.running <- struct{}{}:
		default:
			c.answer(from, id, nil, ErrBusy)
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() { <-cs.running }()
			ans, err := h(c.nameOf(from), body)
			c.answer(from, id, ans, err)
		}()
	case appAnswer, appFailed:
		cs.mu.Lock()
		ch := cs.pending[id]
		cs.mu.Unlock()
		if ch == nil {
			return // the caller gave up
		}
		r := callResult{body: body}
		if kind == appFailed {
			r = callResult{err: fmt.Errorf("%w: %s", ErrCallFailed, body)}
		}
		select {
		case ch <- r:
		default:
		}
	}
}

// answer sends a call's answer, or its failure, back to its caller.
func (c *Cluster) answer(to, id uint64, body []byte, err error) {
	msg := appMsg(appAnswer, id, body)
	if err != nil {
		msg = appMsg(appFailed, id, []byte(err.Error()))
	}
	if err := c.tr.SendApp(to, msg); err != nil {
		c.log.Debug("call answer not sent", "peer", c.nameOf(to), "err", err)
	}
}
