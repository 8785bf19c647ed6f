package multiraft_test

import (
	"fmt"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/internal/multiraft/multiraftest"
)

// printer is a StateMachine that prints what it applies.
type printer struct{ server uint64 }

func (p printer) Apply(ents []*raftpb.Entry) error {
	for _, e := range ents {
		if e.GetType() == raftpb.EntryNormal && len(e.GetData()) > 0 {
			fmt.Printf("server %d applied %q at %d\n", p.server, e.GetData(), e.GetIndex())
		}
	}
	return nil
}

func (printer) Restore(*raftpb.Snapshot) error { return nil }
func (printer) Checkpoint() uint64             { return 0 }
func (printer) LeaderChanged(uint64, uint64)   {}

// Three manual nodes over an in-memory network elect a leader and
// replicate a proposal, driven step by step.
func Example() {
	net := multiraftest.NewFakeTransport(1)
	var nodes []*multiraft.Node
	var disks []*multiraftest.MemDisk
	for id := uint64(1); id <= 3; id++ {
		n, err := multiraft.New(multiraft.Options{ID: id, Manual: true}, net.Endpoint(id))
		if err != nil {
			panic(err)
		}
		net.Endpoint(id).SetHandler(n)
		disk := multiraftest.NewMemDisk()
		err = n.AddGroup(multiraft.GroupConfig{ID: 7, Log: disk.Log(7), StateMachine: printer{id}, Peers: []uint64{1, 2, 3}})
		if err != nil {
			panic(err)
		}
		nodes, disks = append(nodes, n), append(disks, disk)
	}
	// stabilize runs every node, completes every save and delivers every
	// message until nothing moves.
	stabilize := func() {
		for moved := true; moved; {
			moved = false
			for i, n := range nodes {
				moved = n.Process() || moved
				moved = disks[i].Flush() > 0 || moved
			}
			moved = net.DeliverAll() > 0 || moved
		}
	}
	stabilize()
	if err := nodes[0].Campaign(7); err != nil {
		panic(err)
	}
	stabilize()
	leader, term, _ := nodes[1].Leader(7)
	fmt.Printf("leader %d in term %d\n", leader, term)
	if err := nodes[0].ProposeAsync(7, []byte("hello"), func(error) {}); err != nil {
		panic(err)
	}
	stabilize()
	// Output:
	// leader 1 in term 2
	// server 1 applied "hello" at 5
	// server 2 applied "hello" at 5
	// server 3 applied "hello" at 5
}
