package jscluster

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/store/raftlog"
	"github.com/skiffmq/skiff/store/vfs"
)

// walLog is one group's multiraft.Log over the server's shared raft WAL.
type walLog struct {
	*raftlog.Group
	wal *raftlog.Log
}

var _ multiraft.RoomLog = walLog{}

// Save hands u to the WAL's writer (the two Update types have the same
// fields).
func (l walLog) Save(u multiraft.Update, done func(error)) { l.Group.Save(raftlog.Update(u), done) }

// Room reports whether the WAL's queue has room.
func (l walLog) Room() bool { return l.wal.Room() }

// fileSnapLog is a walLog whose snapshots' data live in files of their
// own: the WAL keeps at most raftlog.MaxSnapshotData of a snapshot's data,
// which is then a descriptor of the file (snapDesc). raft sees whole
// snapshots: Snapshot reads the file back, and Save writes a received
// snapshot's data to its file before the WAL records the descriptor.
type fileSnapLog struct {
	walLog
	files snapFiles
}

var _ multiraft.RoomLog = fileSnapLog{}

// Snapshot returns the last snapshot with its data read from its file.
// A file that cannot be read (a newer snapshot just replaced it) is
// raft.ErrSnapshotTemporarilyUnavailable: raft asks again later.
func (l fileSnapLog) Snapshot() (*raftpb.Snapshot, error) {
	s, err := l.Group.Snapshot()
	if err != nil || len(s.GetData()) == 0 {
		return s, err
	}
	data, err := l.files.read(s.GetData())
	if err != nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return &raftpb.Snapshot{Metadata: s.GetMetadata(), Data: data}, nil
}

// Save writes a received snapshot's data to its file, then hands the
// update, with a descriptor instead of the data, to the WAL. The file is
// written on the caller's goroutine: a worker, blocked for one file
// write, only when a follower installs a snapshot, which is rare.
func (l fileSnapLog) Save(u multiraft.Update, done func(error)) {
	if s := u.Snapshot; s != nil && len(s.GetData()) > 0 {
		desc, err := l.files.write(s.GetMetadata().GetIndex(), s.GetData())
		if err != nil {
			done(err)
			return
		}
		u.Snapshot = &raftpb.Snapshot{Metadata: s.GetMetadata(), Data: desc}
	}
	l.walLog.Save(u, done)
}

// createSnapshot records the state machine's state at index i, data, as
// the group's snapshot, with conf state cs.
func (l fileSnapLog) createSnapshot(i uint64, cs *raftpb.ConfState, data []byte) error {
	desc, err := l.files.write(i, data)
	if err != nil {
		return err
	}
	_, err = l.CreateSnapshot(i, cs, desc)
	return err
}

// snapFiles are the snapshot files of a group: dir/<prefix>-<index>.snap.
type snapFiles struct {
	fs     vfs.FS
	dir    string
	prefix string
}

// snapDesc is what the WAL holds of a snapshot kept in a file.
type snapDesc struct {
	File   string `json:"file"`
	Size   int    `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (f snapFiles) name(i uint64) string { return fmt.Sprintf("%s-%020d.snap", f.prefix, i) }

// write writes data, the snapshot at index i, to its file, durably, and
// returns its descriptor.
func (f snapFiles) write(i uint64, data []byte) ([]byte, error) {
	if err := f.fs.MkdirAll(f.dir, 0o755); err != nil {
		return nil, err
	}
	d := snapDesc{File: f.name(i), Size: len(data), CRC32C: crc32.Checksum(data, castagnoli)}
	if err := vfs.WriteFile(f.fs, filepath.Join(f.dir, d.File), data); err != nil {
		return nil, fmt.Errorf("jscluster: snapshot %d: %w", i, err)
	}
	return json.Marshal(&d)
}

// read returns the data a descriptor names, checked.
func (f snapFiles) read(desc []byte) ([]byte, error) {
	var d snapDesc
	if err := json.Unmarshal(desc, &d); err != nil || d.File == "" || filepath.Base(d.File) != d.File {
		return nil, fmt.Errorf("%w: snapshot descriptor %.80q", ErrBadEntry, desc)
	}
	data, err := vfs.ReadFile(f.fs, filepath.Join(f.dir, d.File))
	if err != nil {
		return nil, err
	}
	if len(data) != d.Size || crc32.Checksum(data, castagnoli) != d.CRC32C {
		return nil, fmt.Errorf("%w: snapshot file %s fails its checksum", ErrBadEntry, d.File)
	}
	return data, nil
}

// prune removes the files of snapshots before index keep and, with
// tmps (at start, when no write is under way), the temporary files a
// crash left.
func (f snapFiles) prune(keep uint64, tmps bool) {
	names, err := f.fs.ReadDir(f.dir)
	if err != nil {
		return
	}
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, f.prefix+"-")
		if !ok {
			continue
		}
		if strings.HasSuffix(rest, ".tmp") {
			if tmps {
				_ = f.fs.Remove(filepath.Join(f.dir, n))
			}
			continue
		}
		i, err := strconv.ParseUint(strings.TrimSuffix(rest, ".snap"), 10, 64)
		if err == nil && i < keep {
			_ = f.fs.Remove(filepath.Join(f.dir, n))
		}
	}
}
