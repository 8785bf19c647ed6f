package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
)

// memPayloads is a Payloads hook that keeps payloads in a map: the head is
// the key. Payloads stored since the last Flush are pending, and lost by
// a crash (crash); lost names keys that fail to join; flushErr fails the
// next Flush.
type memPayloads struct {
	mu       sync.Mutex
	next     uint64
	kept     map[uint64][]byte
	pending  map[uint64][]byte
	flushes  int
	syncs    int
	flushErr error
	lost     map[uint64]error
	skip     func(e *pb.Entry) bool // entries kept whole
	onSync   func()
}

func newMemPayloads() *memPayloads {
	return &memPayloads{kept: map[uint64][]byte{}, pending: map[uint64][]byte{}, lost: map[uint64]error{}}
}

func (p *memPayloads) Strip(e *pb.Entry) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.skip != nil && p.skip(e) {
		return nil, false
	}
	p.next++
	p.pending[p.next] = append([]byte(nil), e.GetData()...)
	return binary.AppendUvarint(nil, p.next), true
}

func (p *memPayloads) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushes++
	if err := p.flushErr; err != nil {
		p.flushErr = nil
		return err
	}
	for k, v := range p.pending {
		p.kept[k] = v
	}
	clear(p.pending)
	return nil
}

func (p *memPayloads) Join(index, term uint64, head []byte) ([]byte, error) {
	k, n := binary.Uvarint(head)
	if n != len(head) {
		return nil, fmt.Errorf("bad head %x", head)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.lost[k]; err != nil {
		return nil, err
	}
	b, ok := p.kept[k]
	if !ok {
		return nil, fmt.Errorf("no payload %d (entry %d)", k, index)
	}
	return b, nil
}

func (p *memPayloads) Sync() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncs++
	if p.onSync != nil {
		p.onSync()
	}
	return nil
}

// crash drops what was not flushed.
func (p *memPayloads) crash() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.pending)
}

// requireEntries reads entries lo..hi of g past its cache and checks them
// against ents(gid, ...) of term t.
func requireEntries(t *testing.T, g *Group, gid, lo, hi, term uint64) {
	t.Helper()
	got, err := g.Entries(lo, hi+1, 1<<40)
	require.NoError(t, err)
	require.Len(t, got, int(hi-lo+1))
	for k, e := range got {
		want := ent(gid, lo+uint64(k), term)
		require.Equal(t, want.GetIndex(), e.GetIndex())
		require.Equal(t, want.GetData(), e.GetData(), "entry %d", e.GetIndex())
	}
}

// TestPayloadsStripped: a group with a Payloads hook writes heads, not
// payloads; its entries read back from the files whole, before and after
// a reopen; a hook that stripped entries is flushed once per batch.
func TestPayloadsStripped(t *testing.T) {
	mem := storetest.NewMemFS()
	o := Options{SegmentBytes: 1 << 20, CacheBytes: 1} // every read goes to the files
	l := mustOpen(t, mem, o)
	p := newMemPayloads()
	g := l.Group(1)
	cut, err := g.SetPayloads(p, 0)
	require.NoError(t, err)
	require.Zero(t, cut)
	plain := l.Group(2)
	before := l.Stats().Bytes
	save(t, g, Update{Entries: ents(1, 1, 20, 1), HardState: hardState(1, 0, 10)})
	stripped := l.Stats().Bytes - before
	save(t, plain, Update{Entries: ents(1, 1, 20, 1), HardState: hardState(1, 0, 10)})
	whole := l.Stats().Bytes - before - stripped
	require.Less(t, stripped, whole/3, "heads instead of payloads")
	require.Equal(t, 1, p.flushes, "one batch, one flush")
	requireEntries(t, g, 1, 1, 20, 1)
	require.NoError(t, l.Close())

	l = mustOpen(t, mem, o)
	g = l.Group(1)
	cut, err = g.SetPayloads(p, 5)
	require.NoError(t, err)
	require.Zero(t, cut)
	requireEntries(t, g, 1, 1, 20, 1)
	last, err := g.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(20), last)
}

// TestPayloadsLostEndTheLog: payloads lost to a crash (stored, not
// flushed, while the log's records were written) end the group's log at
// the first entry that cannot be joined, as a torn tail would; with a
// commit index past it, the group is marked damaged, unless the last run
// may have lost acknowledged writes to a power loss: then its records were
// as unsynced as their payloads, and the commit index comes back to the
// end.
func TestPayloadsLostEndTheLog(t *testing.T) {
	const (
		closed    = iota // Close ran
		crashed          // the process stopped, the machine did not
		powerLoss        // the machine restarted too
	)
	for _, tc := range []struct {
		name    string
		commit  uint64
		stop    int
		policy  store.SyncPolicy
		damaged bool
	}{
		{"uncommitted", 8, closed, store.SyncAlways, false},
		{"committed", 15, closed, store.SyncAlways, true},
		{"committed, process crash", 15, crashed, store.SyncInterval, true},
		// The records and their payloads were both unsynced: a torn tail.
		{"committed, power loss, interval", 15, powerLoss, store.SyncInterval, false},
		{"committed, power loss, never", 15, powerLoss, store.SyncNever, false},
		// Nothing acknowledged was unsynced: the payloads' loss is damage.
		{"committed, power loss, always", 15, powerLoss, store.SyncAlways, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := storetest.NewMemFS()
			boot := "boot-1"
			o := Options{SegmentBytes: 1 << 20, CacheBytes: 1, BootID: func() string { return boot },
				Durability: store.Durability{Sync: tc.policy}}
			l, err := Open(withDefaults(mem, o))
			require.NoError(t, err)
			p := newMemPayloads()
			g := l.Group(1)
			_, err = g.SetPayloads(p, 0)
			require.NoError(t, err)
			save(t, g, Update{Entries: ents(1, 1, 20, 1), HardState: hardState(1, 0, tc.commit)})
			disk := mem
			if tc.stop == closed {
				require.NoError(t, l.Close())
			} else {
				require.NoError(t, l.Sync())
				disk = mem.Clone() // as the process left it
				_ = l.Close()
			}
			if tc.stop == powerLoss {
				boot = "boot-2"
			}
			p.lost[10] = errors.New("torn") // entry 10's payload

			l = mustOpen(t, disk, o)
			g = l.Group(1)
			cut, err := g.SetPayloads(p, 3)
			require.NoError(t, err)
			require.Equal(t, uint64(10), cut)
			last, err := g.LastIndex()
			require.NoError(t, err)
			require.Equal(t, uint64(9), last)
			requireEntries(t, g, 1, 1, 9, 1)
			if tc.damaged {
				require.ErrorIs(t, g.Damaged(), ErrCorrupt)
			} else {
				require.NoError(t, g.Damaged())
			}
			hs, _, err := g.InitialState()
			require.NoError(t, err)
			require.Equal(t, min(tc.commit, 9), hs.GetCommit())
			// Raft appends the lost entries again (from its leader).
			save(t, g, Update{Entries: ents(1, 10, 12, 1)})
			requireEntries(t, g, 1, 1, 12, 1)
		})
	}
}

// TestPayloadsFlushFails: a hook whose Flush fails fails its group's
// writes of the batch, and the group; the other groups of the batch are
// written.
func TestPayloadsFlushFails(t *testing.T) {
	gt := newGate()
	fs := &hookFS{FS: storetest.NewMemFS(), onSync: func(name string) { gt.wait(name) }}
	l := mustOpen(t, fs, Options{SegmentBytes: 1 << 20})
	p := newMemPayloads()
	g := l.Group(1)
	_, err := g.SetPayloads(p, 0)
	require.NoError(t, err)
	// Hold the writer in a batch so that the next one takes both groups.
	gt.close()
	first := make(chan error, 1)
	l.Group(3).Save(Update{HardState: hardState(1, 1, 0)}, func(err error) { first <- err })
	<-gt.entered
	p.flushErr = errors.New("disk full")
	failed, ok := make(chan error, 1), make(chan error, 1)
	g.Save(Update{Entries: ents(1, 1, 3, 1)}, func(err error) { failed <- err })
	l.Group(2).Save(Update{Entries: ents(2, 1, 3, 1)}, func(err error) { ok <- err })
	gt.open()
	require.NoError(t, <-first)
	require.ErrorIs(t, <-failed, ErrWrite)
	require.NoError(t, <-ok)
	require.ErrorIs(t, g.Err(), ErrFailed)
	requireEntries(t, l.Group(2), 2, 1, 3, 1)
}

// TestPayloadsGone: payloads gone for good (Join says raft.ErrCompacted)
// make Entries answer raft.ErrCompacted itself, which raft compares with
// ==, and sends a snapshot for.
func TestPayloadsGone(t *testing.T) {
	l := mustOpen(t, storetest.NewMemFS(), Options{SegmentBytes: 1 << 20, CacheBytes: 1})
	p := newMemPayloads()
	p.skip = func(e *pb.Entry) bool { return e.GetIndex() == 2 }
	g := l.Group(1)
	_, err := g.SetPayloads(p, 0)
	require.NoError(t, err)
	save(t, g, Update{Entries: ents(1, 1, 3, 1)})
	p.lost[1] = fmt.Errorf("removed: %w", raft.ErrCompacted)
	_, err = g.Entries(1, 4, 1<<40)
	require.Equal(t, raft.ErrCompacted, err)
	requireEntries(t, g, 1, 2, 3, 1)
	p.lost[2] = errors.New("unreadable")
	_, err = g.Entries(3, 4, 1<<40)
	require.ErrorContains(t, err, "unreadable")
	require.NotErrorIs(t, err, raft.ErrCompacted)
}

// TestPayloadsSyncedFirst: every fsync of the log that covers records
// pointing at payloads syncs the hook first, the background syncer's
// (interval) as the writer's (a batch that must be fsynced).
func TestPayloadsSyncedFirst(t *testing.T) {
	for _, policy := range []store.SyncPolicy{store.SyncInterval, store.SyncAlways} {
		t.Run(policy.String(), func(t *testing.T) {
			var mu sync.Mutex
			var order []string
			note := func(s string) {
				mu.Lock()
				order = append(order, s)
				mu.Unlock()
			}
			fs := &hookFS{FS: storetest.NewMemFS(), onSync: func(name string) {
				if strings.HasSuffix(name, segExt) {
					note("wal")
				}
			}}
			l := mustOpen(t, fs, Options{SegmentBytes: 1 << 20, Durability: store.Durability{Sync: policy}})
			p := newMemPayloads()
			p.onSync = func() { note("payloads") }
			g := l.Group(1)
			_, err := g.SetPayloads(p, 0)
			require.NoError(t, err)
			mu.Lock()
			order = nil
			mu.Unlock()
			save(t, g, Update{Entries: ents(1, 1, 5, 1), HardState: hardState(1, 1, 0)}) // a vote: fsynced
			require.NoError(t, l.Sync())
			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, order)
			require.Equal(t, "payloads", order[0], "%v", order)
			for k, s := range order {
				if s == "wal" {
					require.Equal(t, "payloads", order[k-1], "%v", order)
				}
			}
		})
	}
}
