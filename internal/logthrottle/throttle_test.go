package logthrottle

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// step logs lines, then advances the clock by gap.
type step struct {
	lines int
	gap   time.Duration
}

func TestThrottle(t *testing.T) {
	for _, tc := range []struct {
		name         string
		interval     time.Duration
		steps        []step
		wantLines    int
		wantRepeated []string
	}{
		{
			name: "a run is one line", interval: 0,
			steps:     []step{{lines: 50}},
			wantLines: 1,
		},
		{
			name: "one more per interval with the count", interval: time.Second,
			steps:     []step{{lines: 10, gap: time.Second}, {lines: 5, gap: 999 * time.Millisecond}, {lines: 3}},
			wantLines: 2, wantRepeated: []string{"repeated=9"},
		},
		{
			name: "default interval is ten seconds", interval: 0,
			steps:     []step{{lines: 2, gap: 9 * time.Second}, {lines: 2, gap: time.Second}, {lines: 1}},
			wantLines: 2, wantRepeated: []string{"repeated=3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := slog.New(slog.NewTextHandler(&buf, nil))
			clock := &fakeClock{t: time.Unix(1000, 0)}
			th := Throttle{Interval: tc.interval, now: clock.now}
			for _, s := range tc.steps {
				for range s.lines {
					th.Log(l, slog.LevelError, "disk full", "dir", "x")
				}
				clock.advance(s.gap)
			}
			require.Equal(t, tc.wantLines, strings.Count(buf.String(), "disk full"), buf.String())
			for _, r := range tc.wantRepeated {
				require.Contains(t, buf.String(), r)
			}
		})
	}
}

func TestThrottleConcurrent(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	l := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	var th Throttle
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				th.Log(l, slog.LevelWarn, "again")
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, strings.Count(buf.String(), "again"))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
