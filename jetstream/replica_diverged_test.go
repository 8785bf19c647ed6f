package jetstream_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// TestClusterReplicatedDivergedRebuilt: under the interval policy a
// quorum's power loss may lose acknowledged messages (the policy's
// documented cost). Here two servers lose the tail all three had
// committed while the third is stopped cleanly; released from their hold
// when no leader turns up, they go on and store other messages at the
// same sequences. The third comes back with the lost messages applied:
// its replica diverged. It is rebuilt from the group (store and log), and
// ends holding exactly what the group acknowledged since; nothing panics.
// The group's leader meets the diverged replica in its log (appends below
// the replica's commit index), or, once it compacted its log past that,
// through its snapshot, whose catch-up finds the replica's last message
// different from the group's. (A lost entry that removed messages is
// TestClusterReplicatedCatchupFindsRemoved's: a replica fsyncs its log
// before it applies one, so a power loss no longer makes that case.)
func TestClusterReplicatedDivergedRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		compact bool
	}{{"log", false}, {"snapshot", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.compact {
				jetstream.SetReplicaLog(t, 1, 1<<20)
			}
			// A checkpoint round (every second) fsyncs the raft log: if
			// one came between the entry the quorum is to lose and the
			// power loss, the quorum keeps it, and the scenario is tried
			// again on a new cluster.
			for attempt := 1; !divergedRebuilt(t, tc.compact); attempt++ {
				require.Less(t, attempt, 5, "the quorum kept the entry it was to lose, every time")
				t.Logf("attempt %d: a checkpoint synced the entry before the power loss", attempt)
			}
		})
	}
}

// divergedRebuilt runs TestClusterReplicatedDivergedRebuilt's scenario
// once, and reports false if the quorum did not lose the entry.
func divergedRebuilt(t *testing.T, compact bool) bool {
	jc, js, acked, lead := startUnsyncedR3(t, &nats.StreamConfig{Name: "DV", Subjects: []string{"dv"}}, 5)
	kept := spareOf(lead) // stops cleanly and keeps the tail
	lost := []int{lead, 3 - lead - kept}
	late := map[uint64]string{}
	for k, v := range acked {
		late[k] = v
	}
	publishTo(t, js, late, "dv", "late", 5)
	jc.waitReplicated(t, "DV", late)
	keptApplied, _, _, _ := jetstream.ReplicaLog(jc.js[kept], server.GlobalAccountName, "DV")
	jc.Stop(t, kept)
	jc.powerLoss(t, lost...)
	for _, i := range lost {
		jc.Restart(t, i)
	}
	_, js = jc.connectJS(t, lost[0])
	publishTo(t, js, acked, "dv", "new", 5) // once released, after holdTimeout
	if acked[6] == "" {
		return false // the late messages are at 6 to 10, new ones after them
	}
	for seq, data := range late {
		if seq > 5 {
			require.NotEqual(t, data, acked[seq], "sequence %d: the quorum kept a late message", seq)
		}
	}
	if compact {
		// The leader's log starts past what the diverged replica
		// committed: it gets a snapshot.
		require.Eventually(t, func() bool {
			publishTo(t, js, acked, "dv", "more", 5)
			for _, i := range lost {
				if _, first, _, _ := jetstream.ReplicaLog(jc.js[i], server.GlobalAccountName, "DV"); first <= keptApplied+1 {
					return false
				}
			}
			return true
		}, clustertest.Wait, 100*time.Millisecond, "the group's log compacted past %d", keptApplied)
	}

	jc.Restart(t, kept) // nothing is published from here on
	jc.waitReplicated(t, "DV", acked)
	var damaged []string
	require.NoError(t, filepath.WalkDir(jc.dirs[kept], func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "msgs.damaged" {
			damaged = append(damaged, path)
		}
		return err
	}))
	require.Len(t, damaged, 1, "the diverged replica's store is set aside")
	return true
}

// TestClusterMetaDivergedRebuilt is TestClusterReplicatedDivergedRebuilt
// for the meta group: the entry the quorum loses updates a stream's
// configuration, the one it writes at the same index instead updates it
// otherwise. (A stream's creation is no good here: the new group's log
// syncs the WAL, meta entries with it.) The third server, stopped cleanly
// with the lost update applied, comes back diverged; its meta replica is
// rebuilt from the leader's snapshot rather than held damaged, and ends
// with the group's state, the update the quorum made, which its replica
// of the stream then has too.
func TestClusterMetaDivergedRebuilt(t *testing.T) {
	for attempt := 1; !metaDivergedRebuilt(t); attempt++ {
		require.Less(t, attempt, 5, "the quorum kept the entry it was to lose, every time")
		t.Logf("attempt %d: a sync kept the entry before the power loss", attempt)
	}
}

func metaDivergedRebuilt(t *testing.T) bool {
	cfg := &nats.StreamConfig{Name: "MD", Subjects: []string{"md"}, Description: "early"}
	jc, js, _, _ := startUnsyncedR3(t, cfg, 0)
	leaderName, _ := jc.raft(0).Leader()
	lead := jc.index(leaderName) // the meta group's
	kept := spareOf(lead)        // stops cleanly and keeps the tail
	lost := []int{lead, 3 - lead - kept}

	described := func(i int) string {
		st, _ := jc.raft(i).State()
		sa := st.Streams[jscluster.StreamKey{Account: server.GlobalAccountName, Name: "MD"}]
		if sa == nil {
			return ""
		}
		var c struct{ Description string }
		require.NoError(t, json.Unmarshal(sa.Config, &c))
		return c.Description
	}
	cfg.Description = "lost"
	_, err := js.UpdateStream(cfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return described(kept) == "lost" }, clustertest.Wait, 10*time.Millisecond)
	jc.Stop(t, kept)
	jc.powerLoss(t, lost...)
	for _, i := range lost {
		jc.Restart(t, i)
	}
	require.Eventually(t, func() bool { // released from their hold, after holdTimeout
		a, _ := jc.raft(lost[0]).Leader()
		b, _ := jc.raft(lost[1]).Leader()
		return a != "" && a == b
	}, 2*clustertest.Wait, 20*time.Millisecond, "the two servers that lost power elected no meta leader")
	if described(lost[0]) != "early" {
		return false
	}
	_, js = jc.connectJS(t, lost[0])
	cfg.Description = "new"
	_, err = js.UpdateStream(cfg)
	require.NoError(t, err)

	jc.Restart(t, kept)
	var why string
	rebuilt := func() bool {
		st, err := jc.raft(kept).MetaStatus()
		why = fmt.Sprintf("rebuilds %d, status %v, held %v, err %v, description %q",
			jc.raft(kept).MetaRebuilds(), err, st.Held, st.Err, described(kept))
		return err == nil && jc.raft(kept).MetaRebuilds() > 0 && st.Err == nil && st.Held == multiraft.HoldNone &&
			described(kept) == "new"
	}
	for deadline := time.Now().Add(2 * clustertest.Wait); !rebuilt(); time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the diverged meta replica was not rebuilt: %s", why)
	}
	require.Eventually(t, func() bool { return jc.raft(kept).Health() == nil }, clustertest.Wait, 20*time.Millisecond)
	_, js = jc.connectJS(t, kept)
	require.Eventually(t, func() bool {
		si, err := js.StreamInfo("MD")
		return err == nil && si.Config.Description == "new"
	}, clustertest.Wait, 20*time.Millisecond)
	return true
}
