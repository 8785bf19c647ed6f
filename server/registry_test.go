package server

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRegistry: lookups never block and never see a half-written map
// while accounts are added (run it with -race); a name is registered once.
func TestRegistry(t *testing.T) {
	var r registry
	require.Nil(t, r.lookup("A"))
	require.Nil(t, r.all())
	first := &Account{name: "A"}
	got, added := r.add(first)
	require.True(t, added)
	require.Same(t, first, got)
	got, added = r.add(&Account{name: "A"})
	require.False(t, added)
	require.Same(t, first, got, "the first registration stays")

	const n = 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if r.lookupBytes([]byte("A")) != first {
					t.Error("lost A")
					return
				}
				for _, a := range r.all() {
					if r.lookup(a.name) != a {
						t.Errorf("lookup(%q) is another account", a.name)
						return
					}
				}
			}
		})
	}
	for i := range n {
		_, added := r.add(&Account{name: fmt.Sprintf("acc%03d", i)})
		require.True(t, added)
	}
	close(stop)
	wg.Wait()
	all := r.all()
	require.Len(t, all, n+1)
	require.Equal(t, "A", all[0].name, "sorted by name")
	require.Equal(t, "acc000", all[1].name)
}

// TestRegistryLookupDoesNotAllocate: RMSG and RS+ look accounts up by the
// bytes of the protocol line.
func TestRegistryLookupDoesNotAllocate(t *testing.T) {
	var r registry
	r.add(&Account{name: GlobalAccountName})
	name := []byte(GlobalAccountName)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = r.lookupBytes(name) }))
}
