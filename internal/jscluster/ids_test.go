package jscluster

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"

	"github.com/skiffmq/skiff/store/storetest"
)

func TestRaftID(t *testing.T) {
	seen := map[uint64]string{}
	for _, name := range []string{"s1", "s2", "s3", "a", "", "a-much-longer-server-name"} {
		id := RaftID(name)
		require.Equal(t, id, RaftID(name), "stable")
		require.NotZero(t, id)
		require.False(t, raft.IsLocalMsgTarget(id))
		require.NotContains(t, seen, id, "%q and %q", name, seen[id])
		seen[id] = name
	}
}

// TestClaimDir: the first start claims the raft directory for its server;
// the same name is accepted again, another refused.
func TestClaimDir(t *testing.T) {
	fs := storetest.NewMemFS()
	require.NoError(t, fs.MkdirAll("/raft", 0o755))
	require.NoError(t, claimDir(fs, "/raft", "s1"))
	require.NoError(t, claimDir(fs, "/raft", "s1"))
	require.ErrorIs(t, claimDir(fs, "/raft", "s2"), ErrRenamed)
}
