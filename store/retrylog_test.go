package store

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// lockedBuffer collects log lines written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestSyncRetriesLogOnce: a sync round that fails the same way round after
// round (a full disk, a failing device) logs the first failure and then
// at most one line per throttle interval, not one per round (a line every
// 100 ms per stream flooded the log).
func TestSyncRetriesLogOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		line  string
		fault func(fsys *storetest.FaultFS)
		act   func(t *testing.T, s *Stream)
	}{
		{
			name:  "delete records",
			line:  "store: write delete records; will retry",
			fault: func(fsys *storetest.FaultFS) { fsys.SetBudget(0) },
			act:   func(t *testing.T, s *Stream) { require.NoError(t, s.Remove(3)) },
		},
		{
			name:  "floor",
			line:  "store: write floor; will retry",
			fault: func(fsys *storetest.FaultFS) { fsys.SetBudget(0) },
			act:   func(t *testing.T, s *Stream) { require.NoError(t, s.Remove(1)) },
		},
		{
			name:  "fsync of a delete file",
			line:  "store: fsync failed; will retry",
			fault: func(fsys *storetest.FaultFS) { fsys.FailSync(syscall.EIO) },
			act:   func(t *testing.T, s *Stream) { require.NoError(t, s.Delete(3)) },
		},
		{
			name:  "background sync",
			line:  "store: background sync",
			fault: func(fsys *storetest.FaultFS) { fsys.FailSync(syscall.EIO) },
			act: func(t *testing.T, s *Stream) {
				for range 20 { // each into a new segment, each fsync failing
					mustAppend(t, s, "a", "more")
					time.Sleep(3 * time.Millisecond)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			fsys := storetest.NewFaultFS(storetest.NewMemFS())
			s := mustOpen(t, Options{Dir: memDir, FS: fsys, Durability: Durability{Sync: SyncInterval, Interval: time.Millisecond},
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			for range 5 {
				mustAppend(t, s, "a", "x")
			}
			require.NoError(t, s.WaitDurable(5))
			tc.fault(fsys)
			tc.act(t, s)
			// Many rounds fail: at least 30 failures injected.
			require.Eventually(t, func() bool { return fsys.Injected() >= 30 }, 10*time.Second, time.Millisecond)
			require.Equal(t, 1, logs.count(tc.line), "one line for the run of failures")
			fsys.SetBudget(-1)
			fsys.FailSync(nil)
		})
	}
}
