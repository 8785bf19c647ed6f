package store

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// quiet is a logger for tests that expect errors to be logged.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeClock is a settable clock for MaxAge, SegmentAge and timestamps.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// mustOpen opens a stream and closes it when the test ends.
func mustOpen(t testing.TB, o Options) *Stream {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet
	}
	s, err := Open(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mustAppend appends and returns the sequence.
func mustAppend(t testing.TB, s *Stream, subj, data string) uint64 {
	t.Helper()
	seq, _, err := s.Append(subj, nil, []byte(data), 0)
	require.NoError(t, err)
	return seq
}

// liveSeqs lists the stored sequences by walking Next.
func liveSeqs(t testing.TB, s *Stream) []uint64 {
	t.Helper()
	var out []uint64
	for from := uint64(1); ; {
		m, err := s.Next(from, "")
		if err != nil {
			require.ErrorIs(t, err, ErrNotFound)
			return out
		}
		out = append(out, m.Seq)
		from = m.Seq + 1
	}
}

// payload is the deterministic data of message i, for content checks.
func payload(i uint64, size int) []byte {
	if size == 0 {
		return nil // as the store returns empty data
	}
	b := make([]byte, size)
	s := fmt.Sprintf("msg-%d-", i)
	for j := range b {
		b[j] = s[j%len(s)]
	}
	return b
}

func seqRange(lo, hi uint64) []uint64 {
	var out []uint64
	for q := lo; q <= hi; q++ {
		out = append(out, q)
	}
	return out
}

// mustGet returns the message seq.
func mustGet(t testing.TB, s *Stream, seq uint64) *Msg {
	t.Helper()
	m, err := s.Get(seq)
	require.NoError(t, err)
	return m
}
