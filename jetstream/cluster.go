package jetstream

import (
	"cmp"
	"path/filepath"

	"github.com/skiffmq/skiff/internal/jscluster"
)

// raftDir is the raft layer's directory under StoreDir: the node file, the
// raft WAL and the meta group's snapshots (internal/jscluster).
const raftDir = "raft"

// startCluster starts the raft layer of a clustered server, if
// Options.Cluster asks for it.
func (js *JetStream) startCluster() error {
	if js.opts.Cluster == nil {
		return nil
	}
	o := *js.opts.Cluster
	o.Dir = cmp.Or(o.Dir, filepath.Join(js.opts.StoreDir, raftDir))
	o.Logger = cmp.Or(o.Logger, js.log)
	c, err := jscluster.Start(js.srv, o)
	if err != nil {
		return err
	}
	js.raft = c
	return nil
}
