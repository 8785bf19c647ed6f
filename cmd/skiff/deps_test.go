package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// harnessOnly are modules only the benchmark harness (module
// github.com/skiffmq/skiff/bench) may need.
var harnessOnly = []string{
	"github.com/HdrHistogram/hdrhistogram-go",
	"gonum.org/v1/plot",
	"github.com/redis/go-redis",
	"github.com/rabbitmq/amqp091-go",
	"github.com/twmb/franz-go",
}

// TestBrokerModuleHasNoHarnessDependencies: whoever imports the broker's
// packages (server, jetstream, store, broker, ...) builds them, and their
// tests, with none of the harness's dependencies, and the broker module's
// go.mod requires none of them.
func TestBrokerModuleHasNoHarnessDependencies(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{if .Module}}{{.Module.Path}}{{end}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	mods := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		mods[m] = true
	}
	require.True(t, mods["github.com/skiffmq/skiff"], "go list ran in the broker module")
	require.False(t, mods["github.com/skiffmq/skiff/bench"], "the broker module must not import the harness")
	gomod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	for _, h := range harnessOnly {
		for m := range mods {
			require.False(t, strings.HasPrefix(m, h), "the broker module depends on %s", m)
		}
		require.NotContains(t, string(gomod), h, "go.mod requires %s", h)
	}
}

// TestChaosFSOnlyInItsBuild: the binary built without -tags chaosfs (the
// one users run) does not contain the power-loss file system of the
// fault suite; the chaosfs build does.
func TestChaosFSOnlyInItsBuild(t *testing.T) {
	const pkg = "github.com/skiffmq/skiff/internal/chaosfs"
	for _, tc := range []struct {
		tags string
		want bool
	}{{"", false}, {"chaosfs", true}} {
		t.Run("tags="+tc.tags, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-tags", tc.tags, ".").Output()
			require.NoError(t, err)
			require.Equal(t, tc.want, slices.Contains(strings.Fields(string(out)), pkg))
		})
	}
}
