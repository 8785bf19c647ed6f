package multiraftest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
)

type handler struct {
	mu    sync.Mutex
	got   []string // "from:group" per message, "beat:from:group" per beat
	links []string
}

func (h *handler) Receive(from uint64, b multiraft.Batch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range b.Msgs {
		h.got = append(h.got, string(e.Data))
	}
	for _, bt := range b.Beats {
		h.got = append(h.got, "beat")
		_ = bt
	}
	_ = from
}

func (h *handler) LinkUp(peer uint64)   { h.link("up", peer) }
func (h *handler) LinkDown(peer uint64) { h.link("down", peer) }

func (h *handler) link(what string, peer uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.links = append(h.links, what+string(rune('0'+peer)))
}

func msgs(datas ...string) multiraft.Batch {
	var b multiraft.Batch
	for _, d := range datas {
		b.Msgs = append(b.Msgs, multiraft.Envelope{Group: 1, Data: []byte(d), Bulk: true})
	}
	return b
}

func network(seed int64, n int) (*FakeTransport, []*handler) {
	ft := NewFakeTransport(seed)
	hs := make([]*handler, n+1)
	for id := 1; id <= n; id++ {
		hs[id] = &handler{}
		ft.Endpoint(uint64(id)).SetHandler(hs[id])
	}
	return ft, hs
}

func TestFakeTransportFaults(t *testing.T) {
	for _, c := range []struct {
		name   string
		faults Faults
		check  func(t *testing.T, got []string, st NetStats)
	}{
		{"in order", Faults{}, func(t *testing.T, got []string, st NetStats) {
			require.Equal(t, []string{"a", "b", "c", "d"}, got)
		}},
		{"drop everything", Faults{Drop: 1}, func(t *testing.T, got []string, st NetStats) {
			require.Empty(t, got)
			require.Equal(t, 4, st.Dropped)
		}},
		{"duplicate everything", Faults{Dup: 1}, func(t *testing.T, got []string, st NetStats) {
			require.Equal(t, []string{"a", "a", "b", "b", "c", "c", "d", "d"}, got)
			require.Equal(t, 4, st.Duplicated)
		}},
		{"reorder", Faults{Reorder: true}, func(t *testing.T, got []string, st NetStats) {
			require.ElementsMatch(t, []string{"a", "b", "c", "d"}, got)
			require.NotEqual(t, []string{"a", "b", "c", "d"}, got, "seed 1 reorders four messages")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ft, hs := network(1, 2)
			ft.SetFaults(c.faults)
			require.Empty(t, ft.Endpoint(1).Send(2, msgs("a", "b", "c", "d")))
			ft.DeliverAll()
			c.check(t, hs[2].got, ft.Stats())
		})
	}
}

func TestFakeTransportSeedReplays(t *testing.T) {
	run := func() []string {
		ft, hs := network(42, 2)
		ft.SetFaults(Faults{Drop: 0.3, Dup: 0.3, Reorder: true, Delay: 2})
		for range 10 {
			ft.Endpoint(1).Send(2, msgs("a", "b", "c", "d", "e"))
			ft.Tick()
			ft.Step()
		}
		for range 3 {
			ft.Tick()
		}
		ft.DeliverAll()
		return hs[2].got
	}
	first := run()
	require.NotEmpty(t, first)
	require.Equal(t, first, run())
}

func TestFakeTransportDelay(t *testing.T) {
	ft, hs := network(1, 2)
	ft.SetFaults(Faults{Delay: 3})
	ft.Endpoint(1).Send(2, msgs("a", "b", "c", "d", "e", "f", "g", "h"))
	delivered := 0
	for tick := 0; tick <= 3; tick++ {
		delivered += ft.DeliverAll()
		if tick < 3 {
			ft.Tick()
		}
	}
	require.Equal(t, 8, delivered)
	require.Len(t, hs[2].got, 8)
	require.Zero(t, ft.Pending())
}

func TestFakeTransportPartitionCrash(t *testing.T) {
	ft, hs := network(1, 3)
	require.Equal(t, []string{"up2", "up3"}, hs[1].links, "servers joining are reported up")
	require.Equal(t, []string{"up1"}, hs[3].links[:1])
	for _, h := range hs[1:] {
		h.links = nil
	}
	ft.Endpoint(1).Send(2, msgs("lost"))
	ft.Partition([]uint64{1}, []uint64{2, 3})
	require.Equal(t, []string{"down2", "down3"}, hs[1].links)
	require.Equal(t, []string{"down1"}, hs[2].links)
	require.Len(t, ft.Endpoint(1).Send(2, msgs("x")), 1, "a cut link drops bulk and says so")
	require.Empty(t, ft.Endpoint(2).Send(3, msgs("y")))
	ft.DeliverAll()
	require.Empty(t, hs[2].got)
	require.Equal(t, []string{"y"}, hs[3].got)
	ft.Heal()
	require.Equal(t, []string{"down2", "down3", "up2", "up3"}, hs[1].links)

	ft.Endpoint(3).Send(1, msgs("in flight"))
	ft.Crash(1)
	require.Equal(t, []string{"down1", "up1", "down1"}, hs[2].links)
	ft.DeliverAll()
	require.Equal(t, []string{"down2", "down3", "up2", "up3"}, hs[1].links, "a crashed server hears nothing")
	h := &handler{}
	ft.Endpoint(1).SetHandler(h)
	require.Equal(t, []string{"up2", "up3"}, h.links)
}

func TestFakeTransportBulkCap(t *testing.T) {
	ft, _ := network(1, 2)
	ft.SetFaults(Faults{BulkBytes: 2})
	dropped := ft.Endpoint(1).Send(2, msgs("a", "b", "c"))
	require.Len(t, dropped, 1)
	require.Equal(t, "c", string(dropped[0].Data))
	ft.Step()
	require.Empty(t, ft.Endpoint(1).Send(2, msgs("d")), "a delivered message frees its bytes")
}

func TestMemDisk(t *testing.T) {
	d := NewMemDisk()
	l := d.Log(7)
	require.Same(t, l, d.Log(7))
	var done []error
	save := func(first, n uint64) {
		var ents []*raftpb.Entry
		for i := first; i < first+n; i++ {
			ents = append(ents, &raftpb.Entry{Index: new(i), Term: new(uint64(1))})
		}
		l.Save(multiraft.Update{Entries: ents, HardState: &raftpb.HardState{Term: new(uint64(1)), Commit: new(first)}},
			func(err error) { done = append(done, err) })
	}
	save(1, 3)
	save(4, 2)
	last, _ := l.LastIndex()
	require.Zero(t, last, "nothing is written before it completes")
	require.True(t, d.FlushOne())
	last, _ = l.LastIndex()
	require.Equal(t, uint64(3), last)
	require.Equal(t, 1, d.Pending())
	require.Equal(t, 1, d.Crash(), "a crash loses the save that did not complete")
	require.Len(t, done, 1)
	last, _ = l.LastIndex()
	require.Equal(t, uint64(3), last)
	hs, _, _ := l.InitialState()
	require.Equal(t, uint64(1), hs.GetCommit())
	d.Wipe()
	last, _ = d.Log(7).LastIndex()
	require.Zero(t, last)
}

func TestAsyncMemDisk(t *testing.T) {
	d := NewAsyncMemDisk()
	defer d.Close()
	ch := make(chan error, 1)
	d.Log(1).Save(multiraft.Update{Entries: []*raftpb.Entry{{Index: new(uint64(1)), Term: new(uint64(1))}}}, func(err error) { ch <- err })
	select {
	case err := <-ch:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the writer did not complete the save")
	}
}
