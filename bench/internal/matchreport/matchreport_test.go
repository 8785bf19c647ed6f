package matchreport_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/bench/internal/gobench"
	"github.com/skiffmq/skiff/bench/internal/matchreport"
)

// synthetic writes go test output in which cstrie meets every goal except
// the 2x contention goal against the cached sublist at 1:1.
func synthetic() string {
	var b strings.Builder
	line := func(name string, pairs ...any) {
		fmt.Fprintf(&b, "%s-2\t100", name)
		for i := 0; i < len(pairs); i += 2 {
			fmt.Fprintf(&b, "\t%v %s", pairs[i], pairs[i+1])
		}
		b.WriteString("\n")
	}
	for _, algo := range matchreport.Algos {
		for _, op := range []string{"subscribe", "unsubscribe", "lookup", "churn"} {
			for _, st := range []string{"cold", "hot"} {
				line(fmt.Sprintf("BenchmarkMatch/algo=%s/op=%s/state=%s", algo, op, st), 100, "ns/op", 0, "allocs/op")
			}
		}
		line("BenchmarkThroughput/algo="+algo, 1e7, "ns/op", 4e6, "msgs/s")
		for _, n := range []int{1000, 10000, 100000} {
			line(fmt.Sprintf("BenchmarkMemory/algo=%s/subs=%d", algo, n), 1, "ns/op", 600, "B/sub")
		}
	}
	line("BenchmarkMemory/algo=sublist/subs=100000", 1, "ns/op", 1900, "B/sub")
	for _, r := range []string{"1:1", "1:3"} {
		for _, g := range []int{2, 4, 8, 16} {
			line(fmt.Sprintf("BenchmarkContention/engine=cstrie/ratio=%s/goroutines=%d", r, g), 1e6, "ns/op")
			line(fmt.Sprintf("BenchmarkContention/engine=sublist-nocache/ratio=%s/goroutines=%d", r, g), 3e6, "ns/op")
			slow := 2.5e6
			if r == "1:1" {
				slow = 1.5e6
			}
			line(fmt.Sprintf("BenchmarkContention/engine=sublist/ratio=%s/goroutines=%d", r, g), slow, "ns/op")
		}
	}
	return b.String()
}

func TestReport(t *testing.T) {
	set, err := gobench.Parse(strings.NewReader(synthetic()))
	require.NoError(t, err)
	r := &matchreport.Report{Set: set, Command: "skiff bench match", Date: "2026-11-21", Machine: "- test\n", Count: 1}
	var b strings.Builder
	require.NoError(t, r.WriteMarkdown(&b))
	md := b.String()
	require.Contains(t, md, "| cstrie hot lookup <= 250 ns/op, 0 allocs/op (published 1,637 ns) | 100 ns/op, 0 allocs/op | yes |")
	require.Contains(t, md, "| cstrie throughput >= 3,000,000 msgs/s (published 340,911) | 4,000,000 msgs/s | yes |")
	require.Contains(t, md, "| cstrie >= 2x faster than sublist at 16 goroutines, 1:1 | 1.50x | **no** |")
	require.Contains(t, md, "| cstrie >= 2x faster than sublist at 16 goroutines, 1:3 | 2.50x | yes |")
	require.Contains(t, md, "| cstrie retained bytes per subscription at 100,000 <= nats-server Sublist | 600 vs 1,900 B | yes |")
	require.Contains(t, md, "| naive | lookup | 100 | 787 | 100 | 815,787 | 0 |")

	dir := t.TempDir()
	require.NoError(t, r.Charts(dir))
	pngs, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	require.Len(t, pngs, 7)
	for _, p := range pngs {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
}
