package raftlog

import (
	"encoding/binary"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store/storetest"

	"github.com/skiffmq/skiff/store/vfs"
)

// quiet is a logger for tests that expect errors to be logged.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// walDir is the log's directory in the tests' in-memory file systems.
const walDir = "/wal"

// mustOpen opens a log in walDir of fsys, with small segments unless o
// says otherwise, and closes it when the test ends.
func mustOpen(t testing.TB, fsys vfs.FS, o Options) *Log {
	t.Helper()
	l, err := Open(withDefaults(fsys, o))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func withDefaults(fsys vfs.FS, o Options) Options {
	if o.Dir == "" {
		o.Dir = walDir
	}
	if o.FS == nil {
		o.FS = fsys
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = 4 << 10
	}
	return o
}

// entryData is the data of group g's entry at (i, t): deterministic, so a
// test can check what it reads back, and of varied sizes (some empty).
func entryData(g, i, t uint64) []byte {
	n := int((g*13 + i*37 + t*11) % 300)
	if n < 10 {
		return nil
	}
	b := make([]byte, n)
	h := fnv.New64a()
	var k [24]byte
	binary.LittleEndian.PutUint64(k[0:], g)
	binary.LittleEndian.PutUint64(k[8:], i)
	binary.LittleEndian.PutUint64(k[16:], t)
	_, _ = h.Write(k[:])
	seed := h.Sum64()
	for j := range b {
		seed = seed*6364136223846793005 + 1442695040888963407
		b[j] = byte(seed >> 56)
	}
	return b
}

// ent returns group g's entry (i, t) with its entryData.
func ent(g, i, t uint64) *pb.Entry {
	return &pb.Entry{Index: new(i), Term: new(t), Type: pb.EntryNormal.Enum(), Data: entryData(g, i, t)}
}

// ents returns group g's entries lo..hi, all of term t.
func ents(g, lo, hi, t uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := lo; i <= hi; i++ {
		out = append(out, ent(g, i, t))
	}
	return out
}

// hardState returns a HardState.
func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

// save saves u to g and waits.
func save(t testing.TB, g *Group, u Update) {
	t.Helper()
	require.NoError(t, g.SaveWait(u))
}

// hookFS wraps a file system and calls onSync before every fsync of a
// file (not of a directory): tests hold the writer inside an fsync with
// it, to queue a batch behind it, or count fsyncs.
type hookFS struct {
	vfs.FS
	onSync func(name string)
}

func (h *hookFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil || flag == os.O_RDONLY && !strings.HasSuffix(name, segExt) {
		return f, err
	}
	return &hookFile{File: f, fs: h, name: name}, nil
}

func (h *hookFS) Create(name string) (vfs.File, error) {
	f, err := h.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: h, name: name}, nil
}

type hookFile struct {
	vfs.File
	fs   *hookFS
	name string
}

func (f *hookFile) Sync() error {
	if f.fs.onSync != nil {
		f.fs.onSync(f.name)
	}
	return f.File.Sync()
}

// gate holds fsyncs while closed: the first fsync that finds it closed
// signals entered and waits for open.
type gate struct {
	mu      sync.Mutex
	closed  bool
	entered chan struct{}
	opened  chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1), opened: make(chan struct{})} }

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.opened)
	}
}

func (g *gate) wait(string) {
	g.mu.Lock()
	closed, opened := g.closed, g.opened
	g.mu.Unlock()
	if closed {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-opened
	}
}

// testSeed seals the records of tests that decode records alone.
var testSeed = segmentSeed(7)

// seedOf returns the checksum seed of the records of a segment file's
// contents b, from its first record, a checkpoint whose index is the
// segment's number.
func seedOf(b []byte) uint32 {
	return detectSeed(storetest.FileOf(b), binary.LittleEndian.Uint64(b[17:]), int64(len(b)))
}
