package store

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// snapshotV1 re-encodes a snapshot as an older version wrote it: its log
// has no start record, and may be empty after a compaction.
func snapshotV1(b []byte) []byte {
	b = append([]byte(nil), b...)
	copy(b, snapMagicV1)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

// opsOf returns the offsets of the records of a consumer log.
func opsOf(t *testing.T, log []byte) []int {
	var offs []int
	off := 0
	_, err := decodeOps(log, func(o consumerOp) {
		offs = append(offs, off)
		off += opSize(o.op)
	})
	require.NoError(t, err)
	return offs
}

// TestConsumerLogLostStart: a consumer log emptied, cut at its start, or
// left ahead of a snapshot put back from a copy lost the progress it
// recorded; Open says so, at error level, with the ack floor before and
// after, instead of silently going back (issue: ack floor 29,000 to
// 23,000, or to 0, with no log line). A log that is whole, or an older
// version's compacted log, is not reported.
func TestConsumerLogLostStart(t *testing.T) {
	const dir = "/c"
	logName, snapName := dir+"/"+consumerLogName, dir+"/"+consumerSnapName
	// fill makes a consumer with 50 messages acknowledged, then, with
	// compact, a snapshot at floor 50 and 10 more.
	fill := func(t *testing.T, compact bool) *storetest.MemFS {
		fsys := storetest.NewMemFS()
		c, err := openTestConsumer(dir, fsys, SyncAlways)
		require.NoError(t, err)
		n := uint64(50)
		for q := uint64(1); q <= n; q++ {
			require.NoError(t, c.Delivered(q, q, 1, 1))
			require.NoError(t, c.Ack(q, q))
		}
		if compact {
			require.NoError(t, c.Update(func(*ConsumerSnapshot) {})) // a snapshot at floor 50
			for q := n + 1; q <= n+10; q++ {
				require.NoError(t, c.Delivered(q, q, 1, 1))
				require.NoError(t, c.Ack(q, q))
			}
		}
		require.NoError(t, c.Close())
		return fsys
	}
	for _, tc := range []struct {
		name      string
		compact   bool
		damage    func(t *testing.T, fsys *storetest.MemFS)
		wantLine  string // "" for no error
		wantFloor uint64
		wantArgs  []string
	}{
		{name: "whole", wantFloor: 50, damage: func(*testing.T, *storetest.MemFS) {}},
		{name: "whole after a compaction", compact: true, wantFloor: 60, damage: func(*testing.T, *storetest.MemFS) {}},
		{
			name: "emptied", wantLine: "consumer log is empty", wantFloor: 0,
			damage:   func(t *testing.T, fsys *storetest.MemFS) { fsys.SetContents(logName, nil) },
			wantArgs: []string{"ack_floor_before=0", "ack_floor_after=0", "snapshot_lsn=0"},
		},
		{
			name: "emptied after a compaction", compact: true, wantLine: "consumer log is empty", wantFloor: 50,
			damage:   func(t *testing.T, fsys *storetest.MemFS) { fsys.SetContents(logName, nil) },
			wantArgs: []string{"ack_floor_before=50", "ack_floor_after=50"},
		},
		{
			name: "start cut off", wantLine: "consumer log lost its start", wantFloor: 50, // the later acks replayed
			damage: func(t *testing.T, fsys *storetest.MemFS) {
				log := fsys.Contents(logName)
				fsys.SetContents(logName, log[opsOf(t, log)[41]:]) // 20 deliveries and acks gone, and the start
			},
			wantArgs: []string{"ack_floor_before=0", "ack_floor_after=50", "first_lsn=41"},
		},
		{
			name: "snapshot older than the log", compact: true, wantLine: "consumer snapshot is older than its log", wantFloor: 60,
			damage: func(t *testing.T, fsys *storetest.MemFS) {
				// A snapshot put back from before the compaction: empty.
				fsys.SetContents(snapName, encodeSnapshot(0, &ConsumerSnapshot{}))
			},
			wantArgs: []string{"snapshot_lsn=0", "log_starts_after_lsn=101", "ack_floor_before=0"},
		},
		{
			name: "older version, compacted, empty log", compact: true, wantFloor: 50,
			damage: func(t *testing.T, fsys *storetest.MemFS) {
				fsys.SetContents(snapName, snapshotV1(fsys.Contents(snapName)))
				fsys.SetContents(logName, nil)
			},
		},
		{
			name: "older version, start cut off", compact: true, wantLine: "consumer log lost its start", wantFloor: 60,
			damage: func(t *testing.T, fsys *storetest.MemFS) {
				fsys.SetContents(snapName, snapshotV1(fsys.Contents(snapName)))
				log := fsys.Contents(logName)
				fsys.SetContents(logName, log[opsOf(t, log)[5]:]) // the start and two deliveries and acks
			},
			wantArgs: []string{"lost_lsns=4"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fill(t, tc.compact)
			tc.damage(t, fsys)
			var logged bytes.Buffer
			c, err := OpenConsumerStateOptions(ConsumerOptions{Dir: dir, FS: fsys, Durability: Durability{Sync: SyncAlways},
				Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			require.NoError(t, err)
			defer func() { _ = c.Close() }()
			st, err := c.Load()
			require.NoError(t, err)
			require.Equal(t, tc.wantFloor, st.AckFloor.Stream)
			if tc.wantLine == "" {
				require.NotContains(t, logged.String(), "level=ERROR")
				return
			}
			require.Contains(t, logged.String(), "level=ERROR")
			require.Contains(t, logged.String(), tc.wantLine)
			for _, a := range tc.wantArgs {
				require.Contains(t, logged.String(), a)
			}
			require.NoError(t, c.Delivered(1000, 1000, 1, 1), "the changes go on")
		})
	}
}
