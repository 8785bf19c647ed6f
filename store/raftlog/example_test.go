package raftlog_test

import (
	"fmt"
	"os"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store/raftlog"
)

// Two raft groups share one log: each saves what its RawNode's
// MsgStorageAppend asks for, and reads it back through raft.Storage,
// after a restart too.
func Example() {
	dir, err := os.MkdirTemp("", "raftlog")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	l, err := raftlog.Open(raftlog.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	for _, id := range []uint64{7, 9} {
		m := &pb.Message{ // as raft's Ready hands it to the append thread
			Type:    pb.MsgStorageAppend.Enum(),
			Term:    new(uint64(1)),
			Vote:    new(uint64(1)),
			Commit:  new(uint64(0)),
			Entries: []*pb.Entry{{Index: new(uint64(1)), Term: new(uint64(1)), Data: fmt.Appendf(nil, "hello from %d", id)}},
		}
		done := make(chan error)
		l.Group(id).Save(raftlog.UpdateOf(m), func(err error) {
			// Durable as the policy says (SyncAlways: fsynced): now deliver
			// m.Responses.
			done <- err
		})
		if err := <-done; err != nil {
			panic(err)
		}
	}
	if err := l.Close(); err != nil {
		panic(err)
	}

	l, err = raftlog.Open(raftlog.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	for _, id := range l.Groups() {
		g := l.Group(id)
		hs, _, _ := g.InitialState()
		ents, _ := g.Entries(1, 2, 1<<20)
		fmt.Printf("group %d: term %d, %q\n", id, hs.GetTerm(), ents[0].GetData())
	}
	// Output:
	// group 7: term 1, "hello from 7"
	// group 9: term 1, "hello from 9"
}
