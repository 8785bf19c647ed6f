package raftlog

import (
	"fmt"
	"io"
	"log"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/skiffmq/skiff/store/storetest"
)

// The test below runs etcd raft over the log: three RawNodes with
// AsyncStorageWrites, each on its own Log, their MsgStorageAppend
// messages saved with Group.Save and their responses delivered from its
// callbacks, as the multi-raft node will do.

type raftNode struct {
	id      uint64
	mem     *storetest.MemFS
	log     *Log
	rn      *raft.RawNode
	applied []string // the data of the normal entries applied, in order
	up      bool
}

type raftCluster struct {
	t     *testing.T
	nodes map[uint64]*raftNode
	mu    sync.Mutex
	queue []*pb.Message // messages in flight, storage responses included
}

var raftLogger = &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}

func newRaftCluster(t *testing.T, ids ...uint64) *raftCluster {
	c := &raftCluster{t: t, nodes: map[uint64]*raftNode{}}
	var peers []raft.Peer
	for _, id := range ids {
		peers = append(peers, raft.Peer{ID: id})
	}
	for _, id := range ids {
		n := &raftNode{id: id, mem: storetest.NewMemFS()}
		c.nodes[id] = n
		c.start(n)
		require.NoError(t, n.rn.Bootstrap(peers))
	}
	return c
}

// start opens a node's log and a RawNode on it, with nothing applied.
func (c *raftCluster) start(n *raftNode) {
	l, err := Open(withDefaults(n.mem, Options{SegmentBytes: 4 << 10}))
	require.NoError(c.t, err)
	c.mu.Lock()
	n.log = l
	c.mu.Unlock()
	require.Empty(c.t, n.log.Recovery().Damage)
	n.rn, err = raft.NewRawNode(&raft.Config{ID: n.id, ElectionTick: 10, HeartbeatTick: 1,
		Storage: n.log.Group(1), MaxSizePerMsg: 4 << 10, MaxInflightMsgs: 64,
		AsyncStorageWrites: true, PreVote: true, CheckQuorum: true, Logger: raftLogger})
	require.NoError(c.t, err)
	n.applied, n.up = nil, true
}

// crash stops a node as an operating system crash (os) or a process crash
// would, and starts it again from what its disk kept.
func (c *raftCluster) crash(id uint64, os bool) {
	n := c.nodes[id]
	c.mu.Lock()
	if os {
		n.mem = n.mem.CrashClone()
	} else {
		n.mem = n.mem.Clone()
	}
	old := n.log
	n.log = nil
	c.mu.Unlock()
	_ = old.Close()
	c.start(n)
}

func (c *raftCluster) send(ms ...*pb.Message) {
	c.mu.Lock()
	c.queue = append(c.queue, ms...)
	c.mu.Unlock()
}

// round delivers the messages in flight, then handles every node's Ready.
// It reports whether anything happened.
func (c *raftCluster) round() bool {
	c.mu.Lock()
	q := c.queue
	c.queue = nil
	c.mu.Unlock()
	busy := len(q) > 0
	for _, m := range q {
		if n := c.nodes[m.GetTo()]; n != nil && n.up {
			_ = n.rn.Step(m) // stale responses to a restarted node are refused
		}
	}
	for _, id := range slices.Sorted(mapsKeys(c.nodes)) {
		n := c.nodes[id]
		for n.up && n.rn.HasReady() {
			busy = true
			c.handle(n, n.rn.Ready())
		}
	}
	return busy
}

func (c *raftCluster) handle(n *raftNode, rd raft.Ready) {
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			resps, l := m.GetResponses(), n.log
			l.Group(1).Save(UpdateOf(m), func(err error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				if err == nil && n.log == l { // a crashed incarnation says nothing
					c.queue = append(c.queue, resps...)
				}
			})
		case raft.LocalApplyThread:
			for _, e := range m.GetEntries() {
				switch e.GetType() {
				case pb.EntryConfChange:
					var cc pb.ConfChange
					require.NoError(c.t, proto.Unmarshal(e.GetData(), &cc))
					n.rn.ApplyConfChange(&cc)
				case pb.EntryNormal:
					if len(e.GetData()) > 0 {
						n.applied = append(n.applied, string(e.GetData()))
					}
				}
			}
			c.send(m.GetResponses()...)
		default:
			c.send(m)
		}
	}
}

// runUntil runs rounds, ticking every node every few, until done holds.
func (c *raftCluster) runUntil(what string, done func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; !done(); i++ {
		require.True(c.t, time.Now().Before(deadline), "timed out waiting for %s", what)
		if !c.round() {
			time.Sleep(50 * time.Microsecond) // the writers' callbacks
		}
		if i%20 == 0 {
			for _, n := range c.nodes {
				if n.up {
					n.rn.Tick()
				}
			}
		}
	}
}

func (c *raftCluster) leader() uint64 {
	for id, n := range c.nodes {
		if n.up && n.rn.BasicStatus().RaftState == raft.StateLeader {
			return id
		}
	}
	return 0
}

func (c *raftCluster) propose(from, to int) {
	c.runUntil("a leader", func() bool { return c.leader() != 0 })
	l := c.nodes[c.leader()]
	for i := from; i < to; i++ {
		require.NoError(c.t, l.rn.Propose(fmt.Appendf(nil, "m%d", i)))
	}
}

func (c *raftCluster) allApplied(n int) func() bool {
	return func() bool {
		for _, nd := range c.nodes {
			if len(nd.applied) < n {
				return false
			}
		}
		return true
	}
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestRaftOverLog commits entries through three raft nodes on raftlog,
// crashes a follower (operating system crash) and the leader (process
// crash) in turn while the others go on, restarts them from their logs,
// and checks that every node applies the same entries in the same order.
func TestRaftOverLog(t *testing.T) {
	c := newRaftCluster(t, 1, 2, 3)
	defer func() {
		for _, n := range c.nodes {
			_ = n.log.Close()
		}
	}()
	c.runUntil("bootstrap", func() bool { return c.nodes[1].rn.Campaign() == nil })
	c.propose(0, 50)
	c.runUntil("50 applied", c.allApplied(50))

	c.crash(3, true)
	c.nodes[3].up = false
	c.propose(50, 100)
	c.runUntil("100 applied on 1 and 2", func() bool { return len(c.nodes[1].applied) >= 100 && len(c.nodes[2].applied) >= 100 })
	c.nodes[3].up = true
	c.runUntil("100 applied on 3 after its restart", c.allApplied(100))

	leader := c.leader()
	c.crash(leader, false)
	c.nodes[leader].up = false
	c.runUntil("a new leader", func() bool { return c.leader() != 0 && c.leader() != leader })
	c.propose(100, 150)
	c.nodes[leader].up = true
	c.runUntil("150 applied everywhere", c.allApplied(150))

	want := c.nodes[1].applied
	for i := 0; i < 150; i++ {
		require.Equal(t, fmt.Sprintf("m%d", i), want[i])
	}
	for _, n := range c.nodes {
		require.Equal(t, want, n.applied, "node %d", n.id)
		require.NoError(t, n.log.Group(1).Err())
	}
}
