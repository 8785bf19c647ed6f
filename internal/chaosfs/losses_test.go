package chaosfs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/chaosfs"
	"github.com/skiffmq/skiff/store"
)

// TestLossesAllowed: which acknowledgements a power loss of a quorum may
// take, by policy.
func TestLossesAllowed(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	interval := 100 * time.Millisecond
	for _, tc := range []struct {
		name   string
		policy store.SyncPolicy
		ack    time.Duration // after the loss began
		want   bool
	}{
		{"always, just before", store.SyncAlways, -time.Millisecond, false},
		{"interval, within the interval", store.SyncInterval, -100 * time.Millisecond, true},
		{"interval, within an fsync's time more", store.SyncInterval, -149 * time.Millisecond, true},
		{"interval, as it went", store.SyncInterval, 40 * time.Millisecond, true},
		{"interval, too early", store.SyncInterval, -151 * time.Millisecond, false},
		{"interval, after", store.SyncInterval, 61 * time.Millisecond, false},
		{"never, long before", store.SyncNever, -time.Hour, true},
		{"never, after", store.SyncNever, 61 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := chaosfs.NewLosses(store.Durability{Sync: tc.policy, Interval: interval})
			require.False(t, l.Allowed(at.Add(tc.ack)), "no loss yet")
			l.Add(at, at.Add(10*time.Millisecond))
			require.Equal(t, tc.want, l.Allowed(at.Add(tc.ack)))
			require.Equal(t, tc.policy != store.SyncAlways, l.Any())
		})
	}
}
