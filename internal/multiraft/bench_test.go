package multiraft_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
)

// counter is a StateMachine that counts the proposals it applies.
type counter struct{ n atomic.Int64 }

func (c *counter) Apply(ents []*raftpb.Entry) error {
	for _, e := range ents {
		if e.GetType() == raftpb.EntryNormal && len(e.GetData()) > 0 {
			c.n.Add(1)
		}
	}
	return nil
}

func (c *counter) Restore(*raftpb.Snapshot) error { return nil }
func (c *counter) Checkpoint() uint64             { return 0 }
func (c *counter) LeaderChanged(uint64, uint64)   {}

// BenchmarkMultiRaftPropose measures a proposal's way through three
// servers over loopback TCP with in-memory logs: propose on the leader,
// replicate, commit, apply on the leader. Proposals are pipelined, at
// most a window of them in flight. It prices the glue and raft's protobuf
// API (allocations per proposal), not a disk.
func BenchmarkMultiRaftPropose(b *testing.B) {
	for _, groups := range []int{1, 16} {
		for _, size := range []int{16, 1024} {
			b.Run(fmt.Sprintf("groups=%d/size=%dB", groups, size), func(b *testing.B) {
				benchPropose(b, groups, size)
			})
		}
	}
}

func benchPropose(b *testing.B, ngroups, size int) {
	const window = 1024
	var ids []uint64
	for g := 1; g <= ngroups; g++ {
		ids = append(ids, uint64(g))
	}
	servers := startTCPCluster(b, 3, ids, multiraft.Options{Tick: 20 * time.Millisecond},
		func() multiraft.StateMachine { return &counter{} })
	leaders := make([]*tcpServer, ngroups)
	for i, g := range ids {
		waitUntil(b, 10*time.Second, "a leader", func() bool { return leaderOf(servers, g) != 0 })
		leaders[i] = servers[leaderOf(servers, g)-1]
	}
	applied := func() int64 {
		var n int64
		for i, g := range ids {
			n += leaders[i].sms[g].(*counter).n.Load()
		}
		return n
	}
	data := make([]byte, size)
	var failed atomic.Int64
	done := func(err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for int64(i)-applied() >= window {
			time.Sleep(50 * time.Microsecond)
		}
		k := i % ngroups
		if err := leaders[k].node.ProposeAsync(ids[k], data, done); err != nil {
			b.Fatal(err)
		}
	}
	waitUntil(b, time.Minute, "every proposal applied", func() bool { return applied()+failed.Load() >= int64(b.N) })
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d proposals refused: a leader changed during the run", n)
	}
}
