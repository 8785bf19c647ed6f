package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/subject"

	"github.com/skiffmq/skiff/store/storetest"
)

// TestConcurrentAppendAndRead runs appenders, filtered readers, Get,
// State, WaitDurable and expiry at once (run it with -race). Readers check
// that what Next returns matches its filter, moves forward, and is never
// expired.
func TestConcurrentAppendAndRead(t *testing.T) {
	for _, st := range []Storage{FileStorage, MemoryStorage} {
		t.Run(st.String(), func(t *testing.T) {
			r := &race{clock: newFakeClock(), errs: make(chan error, 64)}
			s, err := Open(Options{Storage: st, Dir: memDir, FS: storetest.NewMemFS(), SegmentBytes: 16 << 10,
				MaxAge: raceMaxAge, MaxMsgsPerSubject: 50, Now: r.clock.Now, Logger: quiet})
			require.NoError(t, err)
			defer func() { _ = s.Close() }()

			var appenders, others sync.WaitGroup
			for g := 0; g < raceAppenders; g++ {
				appenders.Add(1)
				go func() { defer appenders.Done(); r.append(s, g) }()
			}
			for _, filter := range []string{"", "c.1.3", "c.*.7", "c.2.>", "#.5", "c.#"} {
				others.Add(1)
				go func() { defer others.Done(); r.read(s, filter) }()
			}
			others.Add(2)
			go func() { defer others.Done(); r.tick() }()
			go func() { defer others.Done(); r.poke(s) }()
			appenders.Wait()
			r.stop.Store(true)
			others.Wait()
			close(r.errs)
			for err := range r.errs {
				require.NoError(t, err)
			}
			require.Greater(t, r.reads.Load(), int64(100), "the readers read")
			state := s.State()
			require.Equal(t, uint64(raceAppenders*racePerAppender), state.LastSeq)
			// Whatever remains is consistent with the per-subject index.
			var total uint64
			for _, n := range s.Subjects("") {
				total += n
			}
			require.Equal(t, state.Msgs, total)
			require.Equal(t, state.Msgs, uint64(len(liveSeqs(t, s))))
		})
	}
}

const (
	raceAppenders   = 4
	racePerAppender = 600
	raceMaxAge      = 400 * time.Millisecond
)

// race holds what the goroutines of TestConcurrentAppendAndRead share.
type race struct {
	clock *fakeClock
	stop  atomic.Bool
	reads atomic.Int64
	errs  chan error
}

func (r *race) report(err error) {
	select {
	case r.errs <- err:
	default:
	}
}

// append appends racePerAppender messages, waiting for durability now
// and then.
func (r *race) append(s *Stream, g int) {
	var last uint64
	for i := 0; i < racePerAppender; i++ {
		seq, _, err := s.Append(fmt.Sprintf("c.%d.%d", g, i%10), nil, payload(uint64(i), 40), 0)
		if err != nil {
			r.report(err)
			return
		}
		if seq <= last {
			r.report(fmt.Errorf("appender %d: seq %d after %d", g, seq, last))
		}
		last = seq
		if i%50 == 0 {
			if err := s.WaitDurable(seq); err != nil {
				r.report(err)
			}
		}
	}
}

// read follows the stream with a filter until stopped.
func (r *race) read(s *Stream, filter string) {
	var from uint64
	for !r.stop.Load() {
		before := r.clock.Now().UnixNano()
		m, err := s.Next(from, filter)
		if errors.Is(err, ErrNotFound) {
			from = 0 // wrap around
			continue
		}
		if err != nil {
			r.report(err)
			return
		}
		r.reads.Add(1)
		switch {
		case m.Seq < from:
			r.report(fmt.Errorf("filter %q: seq %d before %d", filter, m.Seq, from))
		case filter != "" && !subject.Match(filter, m.Subject):
			r.report(fmt.Errorf("filter %q returned %q", filter, m.Subject))
		case m.Timestamp <= before-int64(raceMaxAge):
			r.report(fmt.Errorf("filter %q returned expired seq %d", filter, m.Seq))
		}
		from = m.Seq + 1
	}
}

// tick moves the clock on, so that messages keep expiring.
func (r *race) tick() {
	for !r.stop.Load() {
		r.clock.Advance(time.Millisecond)
		time.Sleep(50 * time.Microsecond)
	}
}

// poke calls the other read methods at random.
func (r *race) poke(s *Stream) {
	rng := rand.New(rand.NewPCG(1, 1))
	for !r.stop.Load() {
		st := s.State()
		if st.Msgs == 0 {
			continue
		}
		q := st.FirstSeq + uint64(rng.IntN(int(st.LastSeq-st.FirstSeq+1)))
		if m, err := s.Get(q); err == nil && m.Seq != q {
			r.report(fmt.Errorf("Get(%d) returned %d", q, m.Seq))
		} else if err != nil && !errors.Is(err, ErrNotFound) {
			r.report(err)
		}
		_, _ = s.LastBySubject("c.0.0")
		_ = s.SeqAtOrAfterTime(r.clock.Now().Add(-raceMaxAge / 2))
		_ = s.Subjects("c.1.*")
		_ = s.NumPending(q, "c.*.3")
	}
}

// TestConcurrentWaitDurable checks group commit: many goroutines append
// and wait, and every wait returns only when its sequence is covered.
func TestConcurrentWaitDurable(t *testing.T) {
	mem := storetest.NewMemFS()
	s, err := Open(Options{Dir: memDir, FS: mem, Logger: quiet})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				seq, _, err := s.Append("w", nil, []byte("x"), 0)
				if err == nil {
					err = s.WaitDurable(seq)
				}
				if err != nil || s.gc.durable.Load() < seq {
					t.Errorf("seq %d: %v, durable %d", seq, err, s.gc.durable.Load())
					return
				}
			}
		}()
	}
	wg.Wait()
	crashed, err := Open(Options{Dir: memDir, FS: mem.CrashClone(), Logger: quiet})
	require.NoError(t, err)
	defer func() { _ = crashed.Close() }()
	require.Equal(t, uint64(1600), crashed.State().Msgs)
}
