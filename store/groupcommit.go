package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// groupCommit lets many goroutines wait for durability while one fsync
// serves them all. A waiter whose sequence is not yet durable takes mu; by
// the time it has it, the round run by the previous holder may already
// cover it, and if not, it runs a round itself, which covers everything
// written so far, including the appends of every waiter queued behind it.
// Under load, each fsync therefore covers a whole batch of appends.
type groupCommit struct {
	mu      sync.Mutex    // held for a whole round; waiters queue here
	durable atomic.Uint64 // highest sequence a completed round covered

	fmu    sync.Mutex
	failed []failedSpan // rounds that failed; their sequences may be lost
}

type failedSpan struct {
	lo, hi uint64
	err    error
}

// maxFailedSpans bounds the memory of past failures; the oldest go first.
const maxFailedSpans = 64

// wait returns once a round covering t has completed, with the error of
// the round that covered t, if it failed.
func (g *groupCommit) wait(t uint64, round func() (uint64, error)) error {
	if g.durable.Load() < t {
		g.mu.Lock()
		var err error
		if g.durable.Load() < t {
			err = g.runLocked(round)
		}
		g.mu.Unlock()
		if errors.Is(err, ErrClosed) {
			return err
		}
		if g.durable.Load() < t {
			return fmt.Errorf("%w: sequence %d has not been appended", ErrNotFound, t)
		}
	}
	return g.failedErr(t)
}

// runLocked runs one round; the caller holds mu. round returns the last
// sequence it covered.
func (g *groupCommit) runLocked(round func() (uint64, error)) error {
	lo := g.durable.Load() + 1
	target, err := round()
	if errors.Is(err, ErrClosed) {
		return err
	}
	if target >= lo {
		if err != nil {
			g.fmu.Lock()
			if len(g.failed) == maxFailedSpans {
				g.failed = g.failed[1:]
			}
			g.failed = append(g.failed, failedSpan{lo, target, err})
			g.fmu.Unlock()
		}
		g.durable.Store(target)
	}
	return err
}

// failedErr returns the error of a failed round that covered t, or nil.
func (g *groupCommit) failedErr(t uint64) error {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	for _, f := range g.failed {
		if f.lo <= t && t <= f.hi {
			return fmt.Errorf("store: sequence %d may be lost: %w", t, f.err)
		}
	}
	return nil
}
