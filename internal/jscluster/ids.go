package jscluster

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"go.etcd.io/raft/v3"

	"github.com/skiffmq/skiff/store/vfs"
)

// MetaGroup is the raft group ID of the meta group. Stream groups (to
// come) take the meta log index of the entry that created them, which is
// never 1 (index 1 is the founder's snapshot).
const MetaGroup uint64 = 1

// RaftID returns the raft ID of the server called name: the first 8 bytes
// of SHA-256(name), big-endian, rehashed in the (astronomically unlikely)
// case they are 0 or one of raft's local targets. Every server computes
// every other's ID from its name alone, so a restarted server keeps its
// ID and a link names its peer by the name it gives.
func RaftID(name string) uint64 {
	sum := sha256.Sum256([]byte(name))
	for {
		id := binary.BigEndian.Uint64(sum[:8])
		if id != 0 && !raft.IsLocalMsgTarget(id) {
			return id
		}
		sum = sha256.Sum256(sum[:])
	}
}

// nodeFile names the server a raft directory belongs to.
const nodeFile = "node"

type nodeRecord struct {
	Name string `json:"name"`
	ID   uint64 `json:"id"`
}

// claimDir records in dir that it belongs to the server called name, or
// checks that it does: a server renamed would come back with another raft
// ID and the log of the old one, which its peers would take for the old
// server's. An operator who renames a server on purpose renames it in the
// file too.
func claimDir(fsys vfs.FS, dir, name string) error {
	path := filepath.Join(dir, nodeFile)
	b, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b, err := json.Marshal(nodeRecord{Name: name, ID: RaftID(name)})
		if err != nil {
			return err
		}
		return vfs.WriteFile(fsys, path, append(b, '\n'))
	case err != nil:
		return fmt.Errorf("jscluster: %s: %w", path, err)
	}
	var rec nodeRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("jscluster: %s: %w", path, err)
	}
	if rec.Name != name {
		return fmt.Errorf("%w: %s was written by server %q, this is %q (rename the server back, or edit the file if the rename is meant)",
			ErrRenamed, path, rec.Name, name)
	}
	return nil
}
