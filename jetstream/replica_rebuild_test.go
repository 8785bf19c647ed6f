package jetstream_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
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

// TestClusterReplicatedCorruptReadRebuilt: bytes of an acknowledged
// message flipped in a follower's sealed segment, behind an intact index,
// which its open does not scan: the first read that meets the record
// (its duplicate window's, as it opens) fails rather than step over it,
// and the replica is rebuilt at once (its store set aside, the mark to
// rebuild cleared). Every replica holds every acknowledged message, and
// the rebuilt one, made leader, answers the damaged message.
func TestClusterReplicatedCorruptReadRebuilt(t *testing.T) {
	jetstream.SetSegmentBytes(t, 512)
	jc, nc, js, lead := startReplicatedStream(t, "RD", "rd")
	acked := map[uint64]string{}
	publishTo(t, js, acked, "rd", "rd", 20)
	lead = jc.waitReplicated(t, "RD", acked)
	victim := (lead + 1) % 3
	jc.mu.Lock()
	dir := jetstream.StreamDir(jc.js[victim], server.GlobalAccountName, "RD")
	jc.mu.Unlock()
	jc.Stop(t, victim)
	segs, err := filepath.Glob(filepath.Join(dir, "msgs", "*.log"))
	require.NoError(t, err)
	require.Greater(t, len(segs), 1, "the messages span sealed segments")
	raw, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	at := bytes.Index(raw, []byte("rd-1"))
	require.Positive(t, at, "message rd-1 is in the first segment")
	raw[at] ^= 0xff
	require.NoError(t, os.WriteFile(segs[0], raw, 0o644))

	jc.Restart(t, victim)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, "msgs.damaged"))
		return err == nil
	}, clustertest.Wait, 20*time.Millisecond, "the damaged store is set aside")
	jc.waitReplicated(t, "RD", acked)
	_, err = os.Stat(filepath.Join(dir, "REBUILD"))
	require.ErrorIs(t, err, os.ErrNotExist, "the mark is cleared once rebuilt")

	nc = jc.Connect(t, (victim+1)%3)
	require.Eventually(t, func() bool {
		m := stepdownTo(t, nc, "RD", jc.Servers[victim].Name())
		return strings.Contains(string(m.Data), `"success":true`)
	}, clustertest.Wait, 200*time.Millisecond, "the rebuilt replica, released, takes the leadership")
	require.Eventually(t, func() bool {
		_, l := jc.replicas("RD")
		return l == victim
	}, clustertest.Wait, 20*time.Millisecond, "the rebuilt replica leads")
	m, err := jc.Connect(t, victim).Request("$JS.API.STREAM.MSG.GET.RD", []byte(`{"seq":2}`), clustertest.Wait)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"data":"`+base64.StdEncoding.EncodeToString([]byte("rd-1"))+`"`)
}
