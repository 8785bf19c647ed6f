package jetstream_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// TestClusterReplicatedDamageRebuilt: a follower's store fails its
// checksums at its restart (bytes of one acknowledged message flipped on
// disk). A single server would step over the record and count it lost; a
// replica is rebuilt from its group instead: its damaged store is set
// aside, and every acknowledged message is back on every replica, the
// damaged one included, whether the group's log is replayed from its
// start or its snapshot is installed with the messages taken from a peer.
func TestClusterReplicatedDamageRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		compacted bool
	}{
		{"log replayed", false},
		{"snapshot from a peer", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.compacted {
				jetstream.SetReplicaLog(t, 2, 1<<20)
			}
			jc, _, js, lead := startReplicatedStream(t, "DM", "dm")
			acked := map[uint64]string{}
			publishTo(t, js, acked, "dm", "dm", 20)
			lead = jc.waitReplicated(t, "DM", acked)
			victim := (lead + 1) % 3
			if tc.compacted {
				require.Eventually(t, func() bool {
					_, first, _, _ := jc.replicaLog(victim, "DM")
					return first > 10
				}, clustertest.Wait, 50*time.Millisecond, "the victim compacts its log")
			}
			jc.mu.Lock()
			dir := jetstream.StreamDir(jc.js[victim], server.GlobalAccountName, "DM")
			jc.mu.Unlock()
			jc.Stop(t, victim)

			segs, err := filepath.Glob(filepath.Join(dir, "msgs", "*.log"))
			require.NoError(t, err)
			require.NotEmpty(t, segs)
			seg := segs[len(segs)-1]
			raw, err := os.ReadFile(seg)
			require.NoError(t, err)
			at := bytes.Index(raw, []byte("dm-9"))
			require.Positive(t, at, "message dm-9 is in the last segment")
			for i := at; i < at+4; i++ {
				raw[i] ^= 0xff
			}
			require.NoError(t, os.WriteFile(seg, raw, 0o644))

			jc.Restart(t, victim)
			jc.waitReplicated(t, "DM", acked)
			_, err = os.Stat(filepath.Join(dir, "msgs.damaged"))
			require.NoError(t, err, "the damaged store is kept aside")
			if tc.compacted {
				_, _, _, chunks := jc.replicaLog(victim, "DM")
				require.Positive(t, chunks, "the messages came from a peer")
			}
			_, js = jc.connectJS(t, lead)
			publishTo(t, js, acked, "dm", "after", 3)
			jc.waitReplicated(t, "DM", acked)
		})
	}
}
