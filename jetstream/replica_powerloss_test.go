package jetstream_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/chaosfs"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/store/vfs"
)

// Power loss of in-process servers (design 7.2, 7.3). Each server of a
// powered cluster writes its streams and its raft log through a chaosfs
// file system over its directory, under one sync policy. A power loss
// powers a set of servers off at one instant (from then on nothing they
// do reaches their disks), shuts them down, and cuts every file back to
// what its last fsync saw; their next start is a new boot of their
// machines. JetStream's own metadata files, written around the file
// system, are fsynced and renamed into place as they are written, and
// kept as they are.

// holdTimeout is the test servers' hold timeout by default: how long
// replicas held after a power loss of their whole group wait for a leader
// before they are released.
const holdTimeout = 2 * time.Second

// power runs a test cluster's servers on chaosfs file systems.
type power struct {
	policy   jetstream.SyncPolicy
	interval time.Duration
	hold     time.Duration // the hold timeout
	mu       sync.Mutex
	fs       []*chaosfs.FS // by server, as of its last boot
	off      []bool        // powered off, not booted since
}

func newPower(n int, policy jetstream.SyncPolicy, interval time.Duration) *power {
	return &power{policy: policy, interval: interval, hold: holdTimeout, fs: make([]*chaosfs.FS, n), off: make([]bool, n)}
}

// journal is where server i keeps its chaosfs journal.
func journal(dir string) string { return filepath.Join(dir, "chaosfs.journal") }

// boot sets server i's options for a (re)start: its file system over dir,
// its sync policy for streams and raft log alike, and the hold timeout.
func (p *power) boot(t testing.TB, i int, dir string, o *jetstream.Options) {
	fs, err := chaosfs.Open(vfs.OS, journal(dir))
	require.NoError(t, err)
	p.mu.Lock()
	p.fs[i], p.off[i] = fs, false
	p.mu.Unlock()
	o.FS, o.Sync, o.SyncInterval = fs, p.policy, p.interval
	o.Cluster.FS = fs
	o.Cluster.Durability = jetstream.DurabilityOf(p.policy, p.interval)
	o.Cluster.HoldTimeout = p.hold
}

// shutDown hears that server i shut down, and reports whether its power
// was cut first (then its shutdown's errors are expected).
func (p *power) shutDown(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fs[i] != nil {
		_ = p.fs[i].Close()
	}
	return p.off[i]
}

// powerLoss cuts the power of servers idx at one instant, then shuts them
// down and cuts their files; they stay down (Restart boots them). It
// returns when the power began to go and when it was gone from all.
func (jc *jsCluster) powerLoss(t *testing.T, idx ...int) (from, to time.Time) {
	t.Helper()
	p := jc.power
	require.NotNil(t, p, "not a powered cluster")
	from = time.Now()
	p.mu.Lock()
	for _, i := range idx {
		p.fs[i].PowerOff()
		p.off[i] = true
	}
	p.mu.Unlock()
	to = time.Now()
	for _, i := range idx {
		jc.Stop(t, i)
		rep, err := chaosfs.Cut(journal(jc.dirs[i]))
		require.NoError(t, err)
		t.Logf("power loss of %s: %v", fmt.Sprintf("s%d", i+1), rep)
	}
	return from, to
}

// TestClusterReplicatedPurgeSurvivesPowerLoss: under the interval policy
// a purge removes the store's files (at once durable) while its log entry
// waits for the next fsync. The replicas that apply it sync their log
// first (replicaFSM.syncLog): otherwise a power loss of the two that
// applied it takes the entry from every log and leaves their stores
// purged, and the third, stopped before the purge, never gets it and
// keeps the messages for good. Here every replica ends with the same
// store, without the purged messages.
func TestClusterReplicatedPurgeSurvivesPowerLoss(t *testing.T) {
	jc, _, _, lead := startUnsyncedR3(t, &nats.StreamConfig{Name: "PG", Subjects: []string{"pg"}}, 5)
	behind := spareOf(lead) // stops before the purge
	jc.Stop(t, behind)
	_, js := jc.connectJS(t, lead)
	require.NoError(t, js.PurgeStream("PG"))
	jc.waitReplicated(t, "PG", map[uint64]string{})
	up := []int{lead, 3 - lead - behind}
	jc.powerLoss(t, up...)
	for _, i := range up {
		jc.Restart(t, i)
	}
	jc.Restart(t, behind)
	_, js = jc.connectJS(t, up[1])
	late := map[uint64]string{}
	publishTo(t, js, late, "pg", "late", 3) // once released, after holdTimeout
	dump := jc.waitSameStores(t, "PG", func([]string) bool { return true }, "every replica holds the same messages")
	for _, line := range dump {
		require.NotContains(t, line, "early", "a purged message is back")
	}
}
