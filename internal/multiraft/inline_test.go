package multiraft_test

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/internal/multiraft/multiraftest"
)

// goid returns the calling goroutine's ID, from its stack's header.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	return string(b[:bytes.IndexByte(b, ' ')])
}

// savingLog is a MemLog that records on which goroutine each Save ran.
type savingLog struct {
	*multiraftest.MemLog
	mu    sync.Mutex
	saves []string
}

func (l *savingLog) Save(u multiraft.Update, done func(error)) {
	l.mu.Lock()
	l.saves = append(l.saves, goid())
	l.mu.Unlock()
	l.MemLog.Save(u, done)
}

func (l *savingLog) taken() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.saves
	l.saves = nil
	return s
}

type nopSM struct{}

func (nopSM) Apply([]*raftpb.Entry) error       { return nil }
func (nopSM) Restore(*raftpb.Snapshot) error    { return nil }
func (nopSM) Checkpoint() uint64                { return 0 }
func (nopSM) LeaderChanged(leader, term uint64) {}

type nullTransport struct{}

func (nullTransport) Send(uint64, multiraft.Batch) []multiraft.Envelope { return nil }

// What a transport's reader hands to an idle group runs on the reader,
// before Receive returns: no worker is woken on another processor for
// it (scheduler.go runInline).
func TestReceiveRunsIdleGroupInline(t *testing.T) {
	disk := multiraftest.NewMemDisk()
	l := &savingLog{MemLog: disk.Log(7)}
	n, err := multiraft.New(multiraft.Options{ID: 2, Tick: time.Hour}, nullTransport{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	require.NoError(t, n.AddGroup(multiraft.GroupConfig{ID: 7, Log: l, StateMachine: nopSM{}, Peers: []uint64{1, 2}}))
	// The bootstrap's save, on a worker; then the group is idle.
	require.Eventually(t, func() bool { return disk.Flush() > 0 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	disk.Flush()
	l.taken()

	// A heartbeat of a new term: the follower saves the term before it
	// answers.
	n.Receive(1, multiraft.Batch{Beats: []multiraft.Beat{{Group: 7, Term: 2}}})
	require.Equal(t, []string{goid()}, l.taken(), "the save ran on Receive's goroutine, before it returned")
}
