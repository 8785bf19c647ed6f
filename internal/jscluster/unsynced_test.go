package jscluster_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/store"
)

// rebooted makes a stopped server's WAL look as a power loss leaves it:
// not closed, and written under another boot of the machine.
func (m *metaCluster) rebooted(t *testing.T, i int) {
	t.Helper()
	wal := filepath.Join(m.dirs[i], "wal")
	require.NoError(t, os.Remove(filepath.Join(wal, "clean")))
	require.NoError(t, os.WriteFile(filepath.Join(wal, "boot_id"), []byte("a-boot-before\n"), 0o644))
}

// startWithGroup starts three servers with tune's options, a stream
// group on all of them, and a meta entry (BEFORE) applied everywhere; it
// returns the servers' names.
func startWithGroup(t *testing.T, group uint64, tune func(o *jscluster.Options)) (*metaCluster, []string) {
	t.Helper()
	m := startMeta(t, 3)
	m.tune = tune
	m.RestartAll(t)
	l := m.waitFormed(t)
	var names []string
	for i := range 3 {
		names = append(names, m.Servers[i].Name())
	}
	for i := range 3 {
		require.NoError(t, m.r(i).AddGroup(group, names, &listFSM{}))
	}
	require.NoError(t, m.propose(t, l, assign("$G", "BEFORE")))
	m.waitApplied(t, "$G", "BEFORE", false)
	return m, names
}

// TestUnsyncedHeld: a server whose WAL was not closed and whose machine
// restarted since comes back with its meta and stream groups held
// unsynced, under the interval and never policies: with the third server
// down, the one it would vote with gets no leader elected; once the
// third is back, a leader is, the server catches up and is released.
// Under always nothing is held, and the two elect a leader at once.
func TestUnsyncedHeld(t *testing.T) {
	const group = 1000
	for _, tc := range []struct {
		name   string
		policy store.SyncPolicy
		held   bool
	}{
		{"always", store.SyncAlways, false},
		{"interval", store.SyncInterval, true},
		{"never", store.SyncNever, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := startWithGroup(t, group, func(o *jscluster.Options) { o.Durability.Sync = tc.policy })
			for i := range 3 {
				m.Stop(t, i)
			}
			m.rebooted(t, 0)

			m.Restart(t, 0)
			m.Restart(t, 1)
			require.NoError(t, m.r(0).AddGroup(group, nil, &listFSM{}))
			require.NoError(t, m.r(1).AddGroup(group, nil, &listFSM{}))
			require.Equal(t, tc.held, m.r(0).Unsynced())
			require.False(t, m.r(1).Unsynced(), "closed cleanly")
			if !tc.held {
				m.waitLeader(t)
				held, err := m.r(0).GroupHeld(group)
				require.NoError(t, err)
				require.Equal(t, multiraft.HoldNone, held)
				return
			}
			st, err := m.r(0).MetaStatus()
			require.NoError(t, err)
			require.Equal(t, multiraft.HoldUnsynced, st.Held)
			held, err := m.r(0).GroupHeld(group)
			require.NoError(t, err)
			require.Equal(t, multiraft.HoldUnsynced, held)
			require.ErrorContains(t, m.r(0).Health(), "held (unsynced)")
			require.Never(t, func() bool {
				name, _ := m.r(1).Leader()
				return name != ""
			}, 20*tick, tick, "a leader elected with the vote of a server that may have lost what it acknowledged")

			m.Restart(t, 2)
			require.NoError(t, m.r(2).AddGroup(group, nil, &listFSM{}))
			m.waitFormed(t)
			require.Eventually(t, func() bool {
				held, err := m.r(0).GroupHeld(group)
				return err == nil && held == multiraft.HoldNone && m.r(0).Health() == nil
			}, clustertest.Wait, tick, "the server is released once caught up")
		})
	}
}

// TestUnsyncedAllReleased: every server of the cluster lost power: all
// are held, none campaigns, and after the hold timeout they are released
// and elect a leader of the meta group and of a stream group.
func TestUnsyncedAllReleased(t *testing.T) {
	const group = 1000
	m, names := startWithGroup(t, group, func(o *jscluster.Options) {
		o.Durability.Sync = store.SyncInterval
		o.HoldTimeout = time.Second
	})
	for i := range 3 {
		m.Stop(t, i)
		m.rebooted(t, i)
	}
	start := time.Now()
	m.RestartAll(t)
	for i := range 3 {
		require.True(t, m.r(i).Unsynced())
		require.NoError(t, m.r(i).AddGroup(group, nil, &listFSM{}))
	}
	m.waitFormed(t)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "elected before the hold timeout")
	require.Eventually(t, func() bool {
		for i := range 3 {
			if name, _ := m.r(i).GroupLeader(group); !slices.Contains(names, name) {
				return false
			}
		}
		return true
	}, clustertest.Wait, tick, "the stream group elects a leader")
	m.waitApplied(t, "$G", "BEFORE", false)
}

// TestUnsyncedMarkOutlivesRestart: a replica held after a power loss stays
// marked until it has caught up, so a clean restart before then holds it
// again (unsynced with what is left of its log; lost, not wiped, when the
// layer above finds its state gone); once caught up the mark goes, and
// the next start does not hold it. A replica held wiped for another cause
// (a rebuild) stays wiped; one whose state is missing outside such a run
// is wiped.
func TestUnsyncedMarkOutlivesRestart(t *testing.T) {
	const group, other, rebuilt = 1000, 1001, 1002
	m, names := startWithGroup(t, group, func(o *jscluster.Options) { o.Durability.Sync = store.SyncNever })
	for i := range 3 {
		require.NoError(t, m.r(i).AddGroup(other, names, &listFSM{}))
		require.NoError(t, m.r(i).AddGroup(rebuilt, names, &listFSM{}))
	}
	for i := range 3 {
		m.Stop(t, i)
	}
	m.rebooted(t, 0)
	m.Restart(t, 0)
	m.Restart(t, 1)
	require.True(t, m.r(0).Unsynced())
	require.NoError(t, m.r(0).AddGroup(group, nil, &listFSM{}))
	// The layer above found other's state missing, and rebuilds rebuilt.
	require.NoError(t, m.r(0).AddHeldGroup(other, nil, &listFSM{}, multiraft.HoldLost))
	require.NoError(t, m.r(0).AddHeldGroup(rebuilt, nil, &listFSM{}, multiraft.HoldWiped))
	heldIs := func(id uint64, want multiraft.HoldReason) {
		t.Helper()
		held, err := m.r(0).GroupHeld(id)
		require.NoError(t, err)
		require.Equal(t, want, held, "group %d", id)
	}
	heldIs(group, multiraft.HoldUnsynced)
	heldIs(other, multiraft.HoldLost)
	heldIs(rebuilt, multiraft.HoldWiped)
	require.True(t, m.r(0).Marked(group))
	require.True(t, m.r(0).Marked(other))

	// A clean restart before catching up (the third server is still down).
	m.Stop(t, 0)
	m.Restart(t, 0)
	require.False(t, m.r(0).Unsynced(), "closed cleanly")
	require.NoError(t, m.r(0).AddGroup(group, nil, &listFSM{}))
	require.NoError(t, m.r(0).AddHeldGroup(other, nil, &listFSM{}, multiraft.HoldLost))
	heldIs(group, multiraft.HoldUnsynced)
	heldIs(other, multiraft.HoldLost)

	m.Restart(t, 2)
	for _, i := range []int{1, 2} {
		require.NoError(t, m.r(i).AddGroup(group, nil, &listFSM{}))
		require.NoError(t, m.r(i).AddGroup(other, nil, &listFSM{}))
	}
	require.Eventually(t, func() bool {
		return !m.r(0).Marked(group) && !m.r(0).Marked(other) && !m.r(0).Marked(jscluster.MetaGroup)
	}, clustertest.Wait, tick, "the marks go once caught up")
	heldIs(group, multiraft.HoldNone)
	heldIs(other, multiraft.HoldNone)

	m.Stop(t, 0)
	m.Restart(t, 0)
	require.NoError(t, m.r(0).AddGroup(group, nil, &listFSM{}))
	heldIs(group, multiraft.HoldNone)
	require.NoError(t, m.r(0).AddHeldGroup(other, nil, &listFSM{}, multiraft.HoldLost))
	heldIs(other, multiraft.HoldWiped)
}

// TestUnsyncedMarksUnreadable: a mark file that does not parse holds every
// group of the raft log, as after a lost tail, rather than none.
func TestUnsyncedMarksUnreadable(t *testing.T) {
	const group = 1000
	m, _ := startWithGroup(t, group, func(o *jscluster.Options) { o.Durability.Sync = store.SyncInterval })
	m.Stop(t, 0)
	require.NoError(t, os.WriteFile(filepath.Join(m.dirs[0], "unsynced"), []byte("12\nnot-a-group\n"), 0o644))
	m.Restart(t, 0)
	require.False(t, m.r(0).Unsynced(), "closed cleanly")
	require.NoError(t, m.r(0).AddGroup(group, nil, &listFSM{}))
	require.True(t, m.r(0).Marked(group))
	require.Eventually(t, func() bool {
		held, err := m.r(0).GroupHeld(group)
		return err == nil && held == multiraft.HoldNone && !m.r(0).Marked(group)
	}, clustertest.Wait, tick, "released and unmarked once caught up")
}
