package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
	"github.com/skiffmq/skiff/store/vfs"
)

// reservingFile is an in-memory file that records the space reserved on
// it, or refuses to reserve.
type reservingFile struct {
	File
	calls [][2]int64 // off, n
	fail  error
}

func (f *reservingFile) Preallocate(off, n int64) error {
	if f.fail != nil {
		return f.fail
	}
	f.calls = append(f.calls, [2]int64{off, n})
	return nil
}

// TestAppendFileReserves: a file reserves ahead of its writes in steps
// that grow with it (from minReserve to maxReserve) within reserveTo, in
// ranges that follow each other, before each write needs them; a failed
// reservation stops them and the write goes on; a truncate, or unreserve,
// gives the space back.
func TestAppendFileReserves(t *testing.T) {
	newFile := func(t *testing.T, limit int, reserveTo int64) (*appendFile, *reservingFile) {
		f, err := storetest.NewMemFS().Create("/seg.log")
		require.NoError(t, err)
		rf := &reservingFile{File: f}
		return &appendFile{f: rf, limit: limit, reserveTo: reserveTo}, rf
	}
	chunk := func(n int) []byte { return make([]byte, n) }
	const MiB = 1 << 20

	tests := []struct {
		name      string
		limit     int
		reserveTo int64
		writes    []int
		calls     [][2]int64
	}{
		{"a small file reserves a step of minReserve", 0, 64 * MiB, []int{100, 100, 100},
			[][2]int64{{0, 100 + minReserve}}},
		{"steps grow with the file", 0, 64 * MiB, []int{MiB, MiB, MiB, 3 * MiB},
			[][2]int64{{0, MiB + minReserve}, {MiB + minReserve, 2*MiB - minReserve}, {3 * MiB, 6 * MiB}}},
		{"to maxReserve at most", 0, 64 * MiB, []int{20 * MiB, 2 * MiB},
			[][2]int64{{0, 20*MiB + minReserve}, {20*MiB + minReserve, 10*MiB - minReserve}}},
		{"within reserveTo, but never short of a write", 0, 3 * MiB, []int{MiB, MiB, 2 * MiB},
			[][2]int64{{0, MiB + minReserve}, {MiB + minReserve, 2*MiB - minReserve}, {3 * MiB, MiB}}},
		{"buffered writes reserve as they are flushed", 4096, 64 * MiB, []int{1000, 1000, 1000, 1000, 1000},
			[][2]int64{{0, 4000 + minReserve}}},
		{"a file that reserves nothing", 0, 0, []int{MiB}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, rf := newFile(t, tt.limit, tt.reserveTo)
			for _, n := range tt.writes {
				require.NoError(t, a.append(chunk(n)))
				if tt.limit == 0 && tt.reserveTo > 0 {
					require.LessOrEqual(t, a.size, a.reserved, "reserved before written")
				}
			}
			require.NoError(t, a.flush())
			require.Equal(t, tt.calls, rf.calls)
		})
	}

	t.Run("a failed reservation stops them; the writes go on", func(t *testing.T) {
		a, rf := newFile(t, 0, 64*MiB)
		rf.fail = errors.New("no space")
		require.NoError(t, a.append(chunk(100)))
		rf.fail = nil
		require.NoError(t, a.append(chunk(100)))
		require.Empty(t, rf.calls)
		require.Equal(t, int64(200), a.size)
	})

	t.Run("a truncate and unreserve give the space back", func(t *testing.T) {
		a, rf := newFile(t, 0, 64*MiB)
		require.NoError(t, a.append(chunk(3*MiB)))
		require.Equal(t, int64(3*MiB+minReserve), a.reserved)
		require.NoError(t, a.truncate(MiB))
		require.Equal(t, int64(MiB), a.reserved, "what a truncate cut is no longer reserved")
		require.NoError(t, a.append(chunk(100)))
		require.Equal(t, [2]int64{MiB, MiB + 100}, rf.calls[len(rf.calls)-1], "reserved again from the file's end, a step of the file's size")
		require.NoError(t, a.unreserve())
		require.Zero(t, a.reserved)
		require.NoError(t, a.append(chunk(2*MiB)))
		require.Len(t, rf.calls, 2, "a file unreserved reserves no more")
	})
}

// allocatedBytes is the disk space file name's blocks take, or -1 where
// the system does not say.
func allocatedBytes(t *testing.T, name string) int64 {
	t.Helper()
	n, err := storetest.Allocated(name)
	require.NoError(t, err)
	return n
}

// TestSegmentsReserveAhead: on the operating system's file system, the
// active segment's file has space reserved past its records, and a
// segment sealed gives back what it did not use; the records read back,
// across a reopen, which reserves on the active segment again.
func TestSegmentsReserveAhead(t *testing.T) {
	dir := t.TempDir()
	probe, err := OSFS.Create(filepath.Join(dir, "probe"))
	require.NoError(t, err)
	err = vfs.Preallocate(probe, 0, 1<<20)
	require.NoError(t, probe.Close())
	if err != nil {
		t.Skipf("no preallocation here: %v", err)
	}
	if allocatedBytes(t, filepath.Join(dir, "probe")) < 1<<20 {
		t.Skip("the file system reports no reserved blocks")
	}
	require.NoError(t, os.Remove(filepath.Join(dir, "probe")))

	// Segments roll on age, long before their size bound: the space
	// each reserved past its records is what a seal must give back.
	const msgs, size = 9000, 1000
	clk := newFakeClock()
	o := Options{Dir: dir, SegmentAge: time.Minute, Now: clk.Now}
	s := mustOpen(t, o)
	for i := uint64(1); i <= msgs; i++ {
		_, _, err := s.Append("a", nil, payload(i, size), 0)
		require.NoError(t, err)
		if i%3000 == 0 && i < msgs {
			clk.Advance(2 * time.Minute)
		}
	}
	require.NoError(t, s.Flush())

	segs, err := filepath.Glob(filepath.Join(dir, "*"+logExt))
	require.NoError(t, err)
	require.Len(t, segs, 3, "the stream rolled on age")
	for i, name := range segs {
		fi, err := os.Stat(name)
		require.NoError(t, err)
		got := allocatedBytes(t, name)
		if i < len(segs)-1 {
			require.Less(t, got, fi.Size()+64<<10, "%s, sealed, holds its records' space only", filepath.Base(name))
		} else {
			require.Greater(t, got, fi.Size()+64<<10, "%s, active, has space reserved ahead", filepath.Base(name))
			require.LessOrEqual(t, got, fi.Size()+maxReserve+64<<10, "a step ahead at most")
		}
	}
	require.NoError(t, s.Close())
	// What the active segment reserved outlives the close; give it back,
	// as a copy of the directory would, to see the reopened one reserve.
	active := segs[len(segs)-1]
	fi, err := os.Stat(active)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(active, fi.Size()))
	require.Less(t, allocatedBytes(t, active), fi.Size()+64<<10)

	s = mustOpen(t, o)
	for i := uint64(msgs + 1); i <= msgs+100; i++ {
		_, _, err := s.Append("a", nil, payload(i, size), 0)
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush())
	for i := uint64(1); i <= msgs+100; i += 97 {
		m, err := s.Get(i)
		require.NoError(t, err)
		require.Equal(t, payload(i, size), m.Data, "sequence %d", i)
	}
	segs2, err := filepath.Glob(filepath.Join(dir, "*"+logExt))
	require.NoError(t, err)
	require.Equal(t, segs, segs2, "written on, not rolled")
	last := segs2[len(segs2)-1]
	fi, err = os.Stat(last)
	require.NoError(t, err)
	require.Greater(t, allocatedBytes(t, last), fi.Size()+64<<10, "the reopened active segment reserves again")
}
