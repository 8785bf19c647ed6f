package store

import (
	"fmt"
	"path"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// TestWriteBuffer: appends under Options.WriteBuffer are readable at once,
// reach the file only when the buffer overflows, by Flush, by a sync
// round and at a segment's roll, and a process crash loses what was
// still buffered, nothing else.
func TestWriteBuffer(t *testing.T) {
	cases := []struct {
		name    string
		size    int   // payload bytes
		n       int   // appends
		segment int64 // SegmentBytes (0: default)
	}{
		{name: "small records, buffer never full", size: 10, n: 20},
		{name: "buffer overflows", size: 300, n: 40},
		{name: "records larger than the buffer", size: 5000, n: 6},
		{name: "segments roll", size: 300, n: 40, segment: 2048},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := storetest.NewMemFS()
			o := Options{Dir: memDir, FS: mem, WriteBuffer: 4096, SegmentBytes: tc.segment,
				Durability: Durability{Sync: SyncNever}}
			s := mustOpen(t, o)
			want := map[uint64]string{}
			for i := range tc.n {
				data := fmt.Sprintf("%d:%s", i, string(payload(uint64(i), tc.size)))
				want[mustAppend(t, s, "wb", data)] = data
			}
			for seq, data := range want {
				require.Equal(t, data, string(mustGet(t, s, seq).Data), "seq %d read before any flush", seq)
			}
			buffered := s.buffered()
			require.LessOrEqual(t, buffered, 4096)
			if tc.name == "records larger than the buffer" {
				require.Zero(t, buffered, "a record larger than the buffer is written at once")
			}
			// A kill -9 now keeps what was written, and only that.
			crashed := mem.Clone()
			lost := countIn(t, Options{Dir: memDir, FS: crashed, SegmentBytes: tc.segment})
			require.Equal(t, tc.n, lost+bufferedRecords(s), "a crash loses the buffered records only")

			require.NoError(t, s.Flush())
			require.Zero(t, s.buffered())
			require.Equal(t, tc.n, countIn(t, Options{Dir: memDir, FS: mem.Clone(), SegmentBytes: tc.segment}),
				"after Flush a crash loses nothing")
		})
	}
}

// TestWriteBufferSync: a sync round writes the buffer before it fsyncs, so
// WaitDurable's promise holds across an operating system crash.
func TestWriteBufferSync(t *testing.T) {
	mem := storetest.NewMemFS()
	o := Options{Dir: memDir, FS: mem, WriteBuffer: 1 << 20, Durability: Durability{Sync: SyncAlways}}
	s := mustOpen(t, o)
	var last uint64
	for i := range 50 {
		seq, _, err := s.Append("wb", nil, payload(uint64(i), 100), 0)
		require.NoError(t, err)
		last = seq
	}
	require.Positive(t, s.buffered())
	require.NoError(t, s.WaitDurable(last))
	require.Zero(t, s.buffered())
	require.Equal(t, 50, countIn(t, Options{Dir: memDir, FS: mem.CrashClone()}))
}

// TestWriteBufferFailedFlush: a flush the disk refuses keeps the buffer
// (the records stay readable), fails the sync round that needed it, and
// succeeds once the disk has room; the file holds no partial write.
func TestWriteBufferFailedFlush(t *testing.T) {
	mem := storetest.NewMemFS()
	ffs := storetest.NewFaultFS(mem)
	ffs.Match = storetest.IsSegment
	o := Options{Dir: memDir, FS: ffs, WriteBuffer: 1 << 20, Durability: Durability{Sync: SyncInterval}}
	s := mustOpen(t, o)
	for i := range 10 {
		mustAppend(t, s, "wb", fmt.Sprint(i))
	}
	before := len(mem.Contents(path.Join(memDir, segmentBase(1)+logExt)))
	ffs.SetBudget(5) // room for part of the buffer only
	require.ErrorIs(t, s.Flush(), ErrWrite)
	require.ErrorIs(t, s.Sync(10), ErrSync)
	require.Len(t, mem.Contents(path.Join(memDir, segmentBase(1)+logExt)), before, "the partial write was cut off")
	for i := range 10 {
		require.Equal(t, fmt.Sprint(i), string(mustGet(t, s, uint64(i+1)).Data))
	}
	ffs.SetBudget(-1)
	require.NoError(t, s.Flush())
	// The failed round's sequences stay reported as at risk (as after a
	// failed fsync); a later one covers them all again.
	seq := mustAppend(t, s, "wb", "10")
	require.NoError(t, s.Sync(seq))
	require.Equal(t, 11, countIn(t, Options{Dir: memDir, FS: mem.CrashClone()}))
}

// buffered returns the bytes the active segment holds in its write
// buffer.
func (s *Stream) buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fb, ok := s.be.(*fileBackend); ok && fb.active != nil {
		return len(fb.active.log.buf)
	}
	return 0
}

// bufferedRecords counts the records whose bytes are all in the active
// segment's write buffer.
func bufferedRecords(s *Stream) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	fb, ok := s.be.(*fileBackend)
	if !ok || fb.active == nil {
		return 0
	}
	n, written := 0, fb.active.log.written()
	for i := range fb.active.ents.len() {
		if int64(fb.active.ents.at(i).off) >= written {
			n++
		}
	}
	return n
}

// countIn opens a copy of a stream's files and counts its messages.
func countIn(t *testing.T, o Options) int {
	t.Helper()
	s := mustOpen(t, o)
	return int(s.State().Msgs)
}
