package server

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Service responses find their way back through a response table in the
// account that received the request, as in nats-server:
//
//	B: PUB svc _INBOX.x        --service import-->   A: PUB svc _R_.<srv>.<rand>
//	                                                    table: _R_.<srv>.<rand> -> (B, _INBOX.x)
//	B: MSG _INBOX.x   <--response bridge (_R_.<srv>.>)-- A: PUB _R_.<srv>.<rand>
//
// A reply subject in A names the entry, never B's reply, so that nothing
// in A learns or can publish to B's subjects. An entry goes with its
// response (Singleton), or when a response finds nobody, an empty
// response ends a Streamed or Chunked one, or its threshold passes with no
// response (the sweeper); past maxPendingResponses the oldest goes first.

// maxPendingResponses bounds the entries of one account's table.
const maxPendingResponses = 64 << 10

// respSweepInterval is how often the sweeper drops expired entries.
const respSweepInterval = time.Second

// replyChars are the digits of the random parts of reply subjects.
const replyChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// respTable is the response table of one account. Its lock is a leaf:
// nothing else is taken under it.
type respTable struct {
	acc    *Account
	prefix string // "_R_.<server>."
	mu     struct {
		sync.Mutex
		m    map[string]*respEntry
		list respEntry // sentinel of the entries, oldest first
	}
	evicted atomic.Int64 // entries dropped past the bound
	expired atomic.Int64 // entries dropped by the sweeper
}

// respEntry is the way back of one request.
type respEntry struct {
	key       string   // the reply subject in the table's account
	to        *Account // the requester's account
	reply     string   // the requester's reply subject there
	pr        Principal
	rt        ResponseType
	share     bool // the import's Share (shown in /accountz)
	threshold time.Duration
	deadline  int64 // unix nanoseconds
	prev      *respEntry
	next      *respEntry
}

func newRespTable(acc *Account, prefix string) *respTable {
	t := &respTable{acc: acc, prefix: prefix}
	t.mu.m = map[string]*respEntry{}
	t.mu.list.prev, t.mu.list.next = &t.mu.list, &t.mu.list
	return t
}

// newRespPrefix returns a server's reply prefix: "_R_." and six random
// characters, as nats-server's.
func newRespPrefix() string {
	return "_R_." + randomChars(6) + "."
}

func randomChars(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = replyChars[rand.IntN(len(replyChars))]
	}
	return string(b)
}

// add records the way back to reply in account to and returns the entry,
// whose key is the reply subject the request carries in t's account.
func (t *respTable) add(to *Account, reply []byte, pr Principal, rt ResponseType, share bool, threshold time.Duration) *respEntry {
	e := &respEntry{
		key: t.prefix + randomChars(10), to: to, reply: string(reply), pr: pr, rt: rt, share: share,
		threshold: threshold, deadline: time.Now().Add(threshold).UnixNano(),
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.mu.m[e.key] != nil {
		e.key = t.prefix + randomChars(10) // 62^10: a repeat is a broken random source
	}
	if len(t.mu.m) >= maxPendingResponses {
		t.removeLocked(t.mu.list.next)
		t.evicted.Add(1)
	}
	t.mu.m[e.key] = e
	e.prev, e.next = t.mu.list.prev, &t.mu.list
	e.prev.next, t.mu.list.prev = e, e
	return e
}

// take returns the entry of a response's subject, removing a Singleton's
// (the first response is its only one), or nil.
func (t *respTable) take(subj string) *respEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.mu.m[subj]
	if e != nil && e.rt == Singleton {
		t.removeLocked(e)
	}
	return e
}

// remove drops e if it is still in the table.
func (t *respTable) remove(e *respEntry) {
	t.mu.Lock()
	if t.mu.m[e.key] == e {
		t.removeLocked(e)
	}
	t.mu.Unlock()
}

// delivered records that a Streamed or Chunked response was delivered:
// the way back stays open for another threshold.
func (t *respTable) delivered(e *respEntry) {
	t.mu.Lock()
	e.deadline = time.Now().Add(e.threshold).UnixNano()
	t.mu.Unlock()
}

func (t *respTable) removeLocked(e *respEntry) {
	delete(t.mu.m, e.key)
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// sweep drops the entries whose deadline is before now.
func (t *respTable) sweep(now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for e := t.mu.list.next; e != &t.mu.list; {
		next := e.next
		if e.deadline < now {
			t.removeLocked(e)
			t.expired.Add(1)
		}
		e = next
	}
}

// pending returns the number of entries.
func (t *respTable) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.m)
}

// NumPendingResponses returns the requests made to the account's service
// exports through this server whose responses may still come.
func (a *Account) NumPendingResponses() int {
	t := a.resp.Load()
	if t == nil {
		return 0
	}
	return t.pending()
}

// sweepResponses runs until Shutdown, dropping expired entries of every
// response table.
func (s *Server) sweepResponses() {
	defer s.wg.Done()
	tick := time.NewTicker(respSweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.closing:
			return
		case now := <-tick.C:
			for _, t := range s.respTables() {
				t.sweep(now.UnixNano())
			}
		}
	}
}
