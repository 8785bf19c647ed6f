package jetstream_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClusterReplicatedWipedHeld: a replica whose raft directory was
// wiped lost what it acknowledged and voted, so it must not help elect a
// leader that lacks what it acknowledged. Messages committed by the leader
// and one follower only, then both stopped and that follower's raft
// directory wiped: with the other follower (which never had them) and the
// wiped one up, no leader is elected; once the old leader is back, every
// acknowledged message is on every replica.
func TestClusterReplicatedWipedHeld(t *testing.T) {
	jc, nc, js, lead := startReplicatedStream(t, "WP", "wp")
	if lead == 0 {
		// Servers 1 and 2 find each other through server 0's routes: it
		// must be one of the two restarted first.
		stepdownTo(t, nc, "WP", jc.Servers[1].Name())
	}
	acked := map[uint64]string{}
	publishTo(t, js, acked, "wp", "early", 3)
	lead = jc.waitReplicated(t, "WP", acked)
	require.NotZero(t, lead)
	behind, wiped := (lead+1)%3, (lead+2)%3
	jc.Stop(t, behind)
	_, js = jc.connectJS(t, lead)
	publishTo(t, js, acked, "wp", "late", 3) // committed by lead and wiped
	jc.Stop(t, lead)
	jc.Stop(t, wiped)
	require.NoError(t, os.RemoveAll(filepath.Join(jc.dirs[wiped], "raft")))

	jc.Restart(t, behind)
	jc.Restart(t, wiped)
	require.Never(t, func() bool {
		_, l := jc.replicas("WP")
		return l >= 0
	}, 3*time.Second, 50*time.Millisecond, "a wiped replica helped elect a leader without the messages it acknowledged")

	jc.Restart(t, lead)
	jc.waitReplicated(t, "WP", acked)
}
