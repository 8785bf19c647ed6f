package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiffmq/skiff/subject"
	"github.com/stretchr/testify/require"
)

// TestConcurrentAppendAndRead runs appenders, filtered readers, Get,
// State, WaitDurable and expiry at once (run it with -race). Readers check
// that what Next returns matches its filter, moves forward, and is never
// expired.
func TestConcurrentAppendAndRead(t *testing.T) {
	for _, st := range []Storage{FileStorage, MemoryStorage} {
		t.Run(st.String(), func(t *testing.T) {
			clock := newFakeClock()
			const maxAge = 400 * time.Millisecond
			o := Options{Storage: st, Dir: memDir, FS: newMemFS(), SegmentBytes: 16 << 10,
				MaxAge: maxAge, MaxMsgsPerSubject: 50, Now: clock.Now, Logger: quiet}
			s, err := Open(o)
			require.NoError(t, err)
			defer s.Close()

			const appenders, perAppender = 4, 600
			var wg sync.WaitGroup
			var appended atomic.Int64
			var stop atomic.Bool
			errs := make(chan error, 64)
			report := func(err error) {
				select {
				case errs <- err:
				default:
				}
			}
			for g := 0; g < appenders; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					var last uint64
					for i := 0; i < perAppender; i++ {
						seq, _, err := s.Append(fmt.Sprintf("c.%d.%d", g, i%10), nil, payload(uint64(i), 40))
						if err != nil {
							report(err)
							return
						}
						if seq <= last {
							report(fmt.Errorf("appender %d: seq %d after %d", g, seq, last))
						}
						last = seq
						appended.Add(1)
						if i%50 == 0 {
							if err := s.WaitDurable(seq); err != nil {
								report(err)
							}
						}
					}
				}(g)
			}
			var readers sync.WaitGroup
			for _, filter := range []string{"", "c.1.3", "c.*.7", "c.2.>", "#.5", "c.#"} {
				readers.Add(1)
				go func(filter string) {
					defer readers.Done()
					var from uint64
					for !stop.Load() {
						before := clock.Now().UnixNano()
						m, err := s.Next(from, filter)
						if errors.Is(err, ErrNotFound) {
							from = 0 // wrap around
							continue
						}
						if err != nil {
							report(err)
							return
						}
						switch {
						case m.Seq < from:
							report(fmt.Errorf("filter %q: seq %d before %d", filter, m.Seq, from))
						case filter != "" && !subject.Match(filter, m.Subject):
							report(fmt.Errorf("filter %q returned %q", filter, m.Subject))
						case m.Timestamp <= before-int64(maxAge):
							report(fmt.Errorf("filter %q returned expired seq %d", filter, m.Seq))
						}
						from = m.Seq + 1
					}
				}(filter)
			}
			readers.Add(2)
			go func() { // the clock moves, messages expire
				defer readers.Done()
				for !stop.Load() {
					clock.Advance(time.Millisecond)
					time.Sleep(50 * time.Microsecond)
				}
			}()
			go func() {
				defer readers.Done()
				rng := rand.New(rand.NewPCG(1, 1))
				for !stop.Load() {
					st := s.State()
					if st.Msgs > 0 {
						q := st.FirstSeq + uint64(rng.IntN(int(st.LastSeq-st.FirstSeq+1)))
						if m, err := s.Get(q); err == nil && m.Seq != q {
							report(fmt.Errorf("Get(%d) returned %d", q, m.Seq))
						} else if err != nil && !errors.Is(err, ErrNotFound) {
							report(err)
						}
						_, _ = s.LastBySubject("c.0.0")
						_ = s.SeqAtOrAfterTime(clock.Now().Add(-maxAge / 2))
						_ = s.Subjects("c.1.*")
					}
				}
			}()
			wg.Wait()
			stop.Store(true)
			readers.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Equal(t, int64(appenders*perAppender), appended.Load())
			st := s.State()
			require.Equal(t, uint64(appenders*perAppender), st.LastSeq)
			// Whatever remains is consistent with the per-subject index.
			var total uint64
			for _, n := range s.Subjects("") {
				total += n
			}
			require.Equal(t, st.Msgs, total)
			require.Equal(t, st.Msgs, uint64(len(liveSeqs(t, s))))
		})
	}
}

// TestConcurrentWaitDurable checks group commit: many goroutines append
// and wait, and every wait returns only when its sequence is covered.
func TestConcurrentWaitDurable(t *testing.T) {
	mem := newMemFS()
	s, err := Open(Options{Dir: memDir, FS: mem, Logger: quiet})
	require.NoError(t, err)
	defer s.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				seq, _, err := s.Append("w", nil, []byte("x"))
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
	crashed, err := Open(Options{Dir: memDir, FS: mem.crashClone(), Logger: quiet})
	require.NoError(t, err)
	defer crashed.Close()
	require.Equal(t, uint64(1600), crashed.State().Msgs)
}
