package gctune_test

import (
	"fmt"
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/gctune"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live int64
		o    gctune.Options
		want int
	}{
		{0, gctune.Options{}, 800},          // nothing live yet: the most
		{4 * mib, gctune.Options{}, 800},    // 64 MiB is 1,600%: capped
		{16 * mib, gctune.Options{}, 400},   // 64 MiB of headroom
		{64 * mib, gctune.Options{}, 100},   // Go's pace
		{4096 * mib, gctune.Options{}, 100}, // a big heap: never below Go's pace
		{100 * mib, gctune.Options{Headroom: 50 * mib, MinPercent: 20, MaxPercent: 300}, 50},
		{10 * mib, gctune.Options{Headroom: 50 * mib, MinPercent: 20, MaxPercent: 300}, 300},
		{1000 * mib, gctune.Options{Headroom: 50 * mib, MinPercent: 20, MaxPercent: 300}, 20},
		{64 * mib, gctune.Options{MinPercent: 500}, 500}, // MaxPercent below MinPercent: raised to it
	} {
		t.Run(fmt.Sprintf("%dMiB/%+v", tc.live/mib, tc.o), func(t *testing.T) {
			require.Equal(t, tc.want, gctune.Percent(tc.live, tc.o))
		})
	}
}

func TestStartSetsPercent(t *testing.T) {
	t.Setenv("GOGC", "") // set, then unset below: LookupEnv must see it absent
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	t.Run("GOGC set", func(t *testing.T) {
		stop := gctune.Start(gctune.Options{})
		defer stop()
		require.Equal(t, 100, debug.SetGCPercent(100), "the operator's GOGC is kept")
	})
	t.Run("GOGC unset", func(t *testing.T) {
		unsetenv(t, "GOGC")
		stop := gctune.Start(gctune.Options{Headroom: 1 << 40, MaxPercent: 700})
		defer stop()
		require.Equal(t, 700, debug.SetGCPercent(100), "a terabyte of headroom: the most")
		stop()
		stop() // twice is fine
	})
}

func ExamplePercent() {
	// A broker whose live heap is 16 MiB collects once it has grown by
	// 64 MiB, not by 16.
	fmt.Println(gctune.Percent(16<<20, gctune.Options{}))
	fmt.Println(gctune.Percent(2<<30, gctune.Options{}))
	// Output:
	// 400
	// 100
}

// unsetenv removes key from the environment until t ends.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	old, had := os.LookupEnv(key)
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if had {
			_ = os.Setenv(key, old)
		}
	})
}
