package raftlog

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/skiffmq/skiff/store/storetest"
)

// TestStorageConformance runs the script testdata/conformance.txt against
// raft.MemoryStorage and a Group, and after every step compares every
// answer of raft.Storage: FirstIndex, LastIndex, Term of every index
// around the log, Entries of every range with several maxSizes,
// InitialState and Snapshot, errors included. The script's lines:
//
//	append i/t[:empty|:conf] ...   entries (data from entryData)
//	hardstate term vote commit
//	compact i
//	create-snapshot i [voters=a,b] [data=s]
//	apply-snapshot i/t [voters=a,b] [data=s]   a snapshot received from a leader
//	restart                        close the log and open it again
//	kill                           reopen from what a process crash leaves
//	crash                          reopen from what an OS crash leaves
//	error <name>                   the previous step's error on both (default nil)
//
// The log uses small segments and caches, so that answers come from
// files, from the cache and from both, and segments are removed.
func TestStorageConformance(t *testing.T) {
	f, err := os.Open("testdata/conformance.txt")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()

	const gid = 7
	mem := storetest.NewMemFS()
	opts := Options{SegmentBytes: 1 << 10, CacheBytes: 600, MaxCacheBytes: 1 << 20}
	l := mustOpen(t, mem, opts)
	ms := raft.NewMemoryStorage()
	var lastErrs [2]error
	reopen := func(fs *storetest.MemFS) {
		l = mustOpen(t, fs, opts)
		mem = fs
	}

	sc := bufio.NewScanner(f)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		where := fmt.Sprintf("conformance.txt:%d: %s", lineNo, strings.TrimSpace(line))
		g := l.Group(gid)
		cmd, args := fields[0], fields[1:]
		switch cmd {
		case "append":
			var es []*pb.Entry
			for _, a := range args {
				es = append(es, scriptEntry(t, gid, a))
			}
			lastErrs = [2]error{ms.Append(es), g.SaveWait(Update{Entries: es})}
		case "hardstate":
			hs := hardState(atoi(t, args[0]), atoi(t, args[1]), atoi(t, args[2]))
			lastErrs = [2]error{ms.SetHardState(hs), g.SaveWait(Update{HardState: hs})}
		case "compact":
			i := atoi(t, args[0])
			lastErrs = [2]error{ms.Compact(i), g.Compact(i)}
		case "create-snapshot":
			i := atoi(t, args[0])
			cs, data := scriptSnapshotArgs(t, args[1:])
			_, e1 := ms.CreateSnapshot(i, cs, data)
			_, e2 := g.CreateSnapshot(i, cs, data)
			lastErrs = [2]error{e1, e2}
		case "apply-snapshot":
			i, term := indexTerm(t, args[0])
			cs, data := scriptSnapshotArgs(t, args[1:])
			if cs == nil {
				cs = &pb.ConfState{}
			}
			snap := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: new(i), Term: new(term), ConfState: cs}}
			lastErrs = [2]error{ms.ApplySnapshot(snap), g.SaveWait(Update{Snapshot: snap})}
		case "restart":
			require.NoError(t, l.Close(), where)
			reopen(mem)
		case "kill":
			reopen(mem.Clone())
		case "crash":
			reopen(mem.CrashClone())
		case "error":
			for k, e := range lastErrs {
				require.Equal(t, args[0], errName(e), "%s: storage %d: %v", where, k, e)
			}
			lastErrs = [2]error{}
			continue
		default:
			t.Fatalf("%s: unknown command", where)
		}
		if cmd != "error" {
			require.Equal(t, errName(lastErrs[0]), errName(lastErrs[1]), "%s: %v / %v", where, lastErrs[0], lastErrs[1])
		}
		requireSameView(t, viewOf(ms), viewOf(l.Group(gid)), where)
		require.NoError(t, l.Group(gid).Damaged(), where)
	}
	require.NoError(t, sc.Err())
}

// storageView is every answer of a raft.Storage, as text.
type storageView struct {
	First, Last string
	Terms       []string
	Entries     []string
	Initial     string
	Snapshot    string
}

// requireSameView fails with the answers that differ, and only those.
func requireSameView(t *testing.T, want, got storageView, where string) {
	t.Helper()
	var diffs []string
	add := func(what, w, g string) {
		if w != g && len(diffs) < 10 {
			diffs = append(diffs, fmt.Sprintf("%s:\n  memory:  %.300s\n  raftlog: %.300s", what, w, g))
		}
	}
	add("FirstIndex", want.First, got.First)
	add("LastIndex", want.Last, got.Last)
	add("InitialState", want.Initial, got.Initial)
	add("Snapshot", want.Snapshot, got.Snapshot)
	for _, l := range []struct {
		what      string
		want, got []string
	}{{"Term", want.Terms, got.Terms}, {"Entries", want.Entries, got.Entries}} {
		for i := range max(len(l.want), len(l.got)) {
			var w, g string
			if i < len(l.want) {
				w = l.want[i]
			}
			if i < len(l.got) {
				g = l.got[i]
			}
			add(l.what, w, g)
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("%s: answers differ:\n%s", where, strings.Join(diffs, "\n"))
	}
}

func viewOf(s raft.Storage) storageView {
	var v storageView
	first, err := s.FirstIndex()
	v.First = fmt.Sprint(first, errName(err))
	last, err := s.LastIndex()
	v.Last = fmt.Sprint(last, errName(err))
	for i := uint64(0); i <= last+2; i++ {
		term, err := s.Term(i)
		v.Terms = append(v.Terms, fmt.Sprintf("%d:%d:%s", i, term, errName(err)))
	}
	for lo := max(first, 1) - 1; lo <= last; lo++ {
		for hi := lo + 1; hi <= last+1; hi++ {
			for _, maxSize := range []uint64{0, 100, 400, 1000, math.MaxUint64} {
				es, err := s.Entries(lo, hi, maxSize)
				v.Entries = append(v.Entries, fmt.Sprintf("[%d,%d) max %d: %s %s", lo, hi, maxSize, entriesText(es), errName(err)))
			}
		}
	}
	hs, cs, err := s.InitialState()
	if raft.IsEmptyHardState(hs) {
		hs = nil // MemoryStorage returns what it was given; an empty one is none
	}
	v.Initial = fmt.Sprintf("hs=%v cs=%v %s", hs, cs, errName(err))
	snap, err := s.Snapshot()
	v.Snapshot = fmt.Sprintf("meta=%v data=%x %s", snap.GetMetadata(), snap.GetData(), errName(err))
	return v
}

func entriesText(es []*pb.Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%d/%d/%v/size=%d/data=%x ", e.GetIndex(), e.GetTerm(), e.GetType(), proto.Size(e), e.GetData())
	}
	return b.String()
}

// errName names the raft or raftlog sentinel an error is.
func errName(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{raft.ErrCompacted, "compacted"}, {raft.ErrUnavailable, "unavailable"},
		{raft.ErrSnapOutOfDate, "snap-out-of-date"}, {ErrInvalid, "invalid"},
		{ErrFailed, "failed"}, {ErrCorrupt, "corrupt"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "nil"
}

func atoi(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	return n
}

func indexTerm(t *testing.T, s string) (uint64, uint64) {
	t.Helper()
	i, term, ok := strings.Cut(s, "/")
	require.True(t, ok, s)
	return atoi(t, i), atoi(t, term)
}

// scriptEntry parses i/t[:empty|:conf].
func scriptEntry(t *testing.T, g uint64, a string) *pb.Entry {
	t.Helper()
	it, kind, _ := strings.Cut(a, ":")
	i, term := indexTerm(t, it)
	e := ent(g, i, term)
	switch kind {
	case "":
	case "empty": // a new leader's empty entry
		e.Data = nil
	case "conf":
		e.Type = pb.EntryConfChange.Enum()
	case "notype":
		e.Type = nil
	default:
		t.Fatalf("entry %s: unknown kind", a)
	}
	return e
}

func scriptSnapshotArgs(t *testing.T, args []string) (*pb.ConfState, []byte) {
	t.Helper()
	var cs *pb.ConfState
	var data []byte
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "voters":
			cs = &pb.ConfState{}
			for _, id := range strings.Split(v, ",") {
				cs.Voters = append(cs.Voters, atoi(t, id))
			}
		case "data":
			data = []byte(v)
		default:
			t.Fatalf("snapshot argument %s", a)
		}
	}
	return cs, data
}
