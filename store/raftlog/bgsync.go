package raftlog

import (
	"fmt"
	"sync"
)

// The background syncer fsyncs the active segment for SyncInterval's
// periodic round and for Log.Sync under SyncInterval and SyncNever, on a
// goroutine of its own: the writer goes on writing while the disk
// flushes, instead of stalling every group's appends (and so raft's
// acknowledgements) for the length of an fsync. An fsync covers what was
// written before it started, so a request made after a write is served by
// an fsync that starts after it. Under SyncAlways the writer fsyncs each
// batch itself, before its callbacks.
//
// A failed background fsync is reported to the writer (takeFailure),
// which starts a new segment, as it does when its own fsync fails; a
// Log.Sync it served gets the error.
type bgSyncer struct {
	l    *Log
	mu   sync.Mutex
	cond sync.Cond
	reqs []syncReq
	// busy: requests are queued or an fsync is running.
	busy   bool
	closed bool
	failed error // the first failure the writer has not taken yet
	done   chan struct{}
}

// syncReq asks for an fsync of seg (pinned by acquire until served),
// after hooks' (payloads.go), and then calls done.
type syncReq struct {
	seg   *segment
	done  []func(error)
	hooks []Payloads
}

func newBGSyncer(l *Log) *bgSyncer {
	b := &bgSyncer{l: l, done: make(chan struct{})}
	b.cond.L = &b.mu
	go b.run()
	return b
}

// request queues an fsync of seg, which the caller (the writer) has
// pinned with seg.acquire, then done's calls.
func (b *bgSyncer) request(seg *segment, done []func(error), hooks []Payloads) {
	b.mu.Lock()
	b.reqs = append(b.reqs, syncReq{seg: seg, done: done, hooks: hooks})
	b.busy = true
	b.mu.Unlock()
	b.cond.Signal()
}

// idle reports whether no fsync is queued or running.
func (b *bgSyncer) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.busy
}

// takeFailure returns, once, the error of a failed background fsync.
func (b *bgSyncer) takeFailure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.failed
	b.failed = nil
	return err
}

// close serves what is queued, then stops the goroutine and waits for it.
func (b *bgSyncer) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Signal()
	<-b.done
}

func (b *bgSyncer) run() {
	defer close(b.done)
	for {
		b.mu.Lock()
		for len(b.reqs) == 0 && !b.closed {
			b.busy = false
			b.cond.Wait()
		}
		reqs := b.reqs
		b.reqs = nil
		b.mu.Unlock()
		if len(reqs) == 0 {
			return // closed, nothing left
		}
		errs := map[*segment]error{}
		var hooks []Payloads
		for _, r := range reqs {
			for _, p := range r.hooks {
				if !containsHook(hooks, p) {
					hooks = append(hooks, p)
				}
			}
		}
		hookErr := syncHooks(hooks) // before the records that point at them
		for _, r := range reqs {
			if _, done := errs[r.seg]; done {
				continue
			}
			if hookErr != nil {
				errs[r.seg] = hookErr
				continue
			}
			err := r.seg.f.Sync()
			b.l.count(func(s *Stats) { s.Fsyncs++ })
			if err != nil {
				err = fmt.Errorf("%w: %s: %w", ErrSync, r.seg.name, err)
			}
			errs[r.seg] = err
		}
		var failed error
		for _, r := range reqs {
			err := errs[r.seg]
			for _, f := range r.done {
				f(err)
			}
			r.seg.release()
			if err != nil && failed == nil {
				failed = err
			}
		}
		if failed != nil {
			b.mu.Lock()
			if b.failed == nil {
				b.failed = failed
			}
			b.mu.Unlock()
			b.l.wakeWriter()
		}
	}
}
