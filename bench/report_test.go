package bench_test

import (
	"bufio"
	"encoding/json"
	"image/png"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/bench"
)

// knownResult is a result whose corrected latencies are 1, 2, ... 1000 µs
// and whose uncorrected ones are half those.
func knownResult() *bench.LatencyResult {
	r := &bench.LatencyResult{
		Target: "nats", Rate: 3000, Size: 1 << 10, Connections: 1, Duration: 30 * time.Second,
		Corrected: bench.NewHistogram(), Uncorrected: bench.NewHistogram(),
		Sent: 1002, Received: 1000, Behind: 1500 * time.Microsecond,
	}
	for i := 1; i <= 1000; i++ {
		r.Corrected.Record(time.Duration(i) * time.Microsecond)
		r.Uncorrected.Record(time.Duration(i) * time.Microsecond / 2)
	}
	return r
}

var percentileKeys = []string{"50", "90", "99", "99.9", "99.99", "99.999", "99.9999", "100"}

// TestReportJSON pins the JSON that --json writes: these keys are what
// other tools read.
func TestReportJSON(t *testing.T) {
	b, err := json.Marshal(knownResult().Report())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.ElementsMatch(t, []string{"target", "rate", "size", "connections", "duration_s",
		"corrected", "uncorrected", "sent", "received", "lost", "behind_us"}, slices.Collect(maps.Keys(m)),
		"url and harness_overhead are omitted when empty")
	require.Equal(t, "nats", m["target"])
	require.EqualValues(t, 3000, m["rate"])
	require.EqualValues(t, 1024, m["size"])
	require.EqualValues(t, 30, m["duration_s"])
	require.EqualValues(t, 2, m["lost"])
	require.EqualValues(t, 1500, m["behind_us"])
	for _, kind := range []string{"corrected", "uncorrected"} {
		ps, ok := m[kind].(map[string]any)
		require.True(t, ok, "%s is an object", kind)
		require.ElementsMatch(t, percentileKeys, slices.Collect(maps.Keys(ps)), kind)
	}
	// Microseconds, within the histogram's three significant digits.
	c := m["corrected"].(map[string]any)
	require.InDelta(t, 500, c["50"], 1)
	require.InDelta(t, 990, c["99"], 1)
	require.InDelta(t, 1000, c["100"], 1)
	require.InDelta(t, 500, m["uncorrected"].(map[string]any)["100"], 1)

	rep := knownResult().Report()
	rep.URL = "nats://127.0.0.1:4222"
	rep.Overhead = knownResult().Corrected.Summary()
	b, err = json.Marshal(rep)
	require.NoError(t, err)
	m = nil
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, "nats://127.0.0.1:4222", m["url"])
	require.ElementsMatch(t, percentileKeys, slices.Collect(maps.Keys(m["harness_overhead"].(map[string]any))))
}

// TestWriteHGRMs checks that both files are in HdrHistogram's percentile
// distribution format: a header, rows of value (µs), percentile (0..1),
// total count and 1/(1-percentile), all non-decreasing, then a footer.
func TestWriteHGRMs(t *testing.T) {
	dir := t.TempDir()
	r := knownResult()
	require.NoError(t, r.WriteHGRMs(dir, "1KB-3000rps-1conn-nats"))
	for kind, maxUS := range map[string]float64{"corrected": 1000, "uncorrected": 500} {
		path := filepath.Join(dir, "1KB-3000rps-1conn-nats-"+kind+".hgrm")
		f, err := os.Open(path)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		require.True(t, sc.Scan())
		require.Equal(t, []string{"Value", "Percentile", "TotalCount", "1/(1-Percentile)"}, strings.Fields(sc.Text()))
		var rows int
		var lastValue, lastP float64
		var lastCount int64
		var footer []string
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch {
			case line == "":
				continue
			case strings.HasPrefix(line, "#["):
				footer = append(footer, line)
				continue
			}
			require.Empty(t, footer, "a row after the footer")
			fs := strings.Fields(line)
			require.Len(t, fs, 4, line)
			v, err1 := strconv.ParseFloat(fs[0], 64)
			p, err2 := strconv.ParseFloat(fs[1], 64)
			n, err3 := strconv.ParseInt(fs[2], 10, 64)
			require.NoError(t, err1, line)
			require.NoError(t, err2, line)
			require.NoError(t, err3, line)
			if fs[3] != "inf" {
				inv, err := strconv.ParseFloat(fs[3], 64)
				require.NoError(t, err, line)
				require.InEpsilon(t, 1/(1-p), inv, 0.01, line)
			}
			require.GreaterOrEqual(t, v, lastValue, line)
			require.GreaterOrEqual(t, p, lastP, line)
			require.GreaterOrEqual(t, n, lastCount, line)
			require.LessOrEqual(t, p, 1.0, line)
			lastValue, lastP, lastCount = v, p, n
			rows++
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
		require.Greater(t, rows, 20, kind)
		require.Equal(t, 1.0, lastP, kind)
		require.EqualValues(t, 1000, lastCount, kind)
		require.InDelta(t, maxUS, lastValue, maxUS/1000+0.5, kind)
		require.Len(t, footer, 3, kind)
		require.Contains(t, footer[1], "Total count    =         1000")
	}
}

func TestPlotLatency(t *testing.T) {
	dir := t.TempDir()
	for _, uncorrected := range []bool{false, true} {
		path := filepath.Join(dir, "plot-"+strconv.FormatBool(uncorrected)+".png")
		a, b := knownResult(), knownResult()
		require.NoError(t, bench.PlotLatency(path, "1KB at 3000 req/s", []string{"skiff", "nats-server"},
			[]*bench.LatencyResult{a, b}, uncorrected))
		f, err := os.Open(path)
		require.NoError(t, err)
		img, err := png.Decode(f)
		require.NoError(t, f.Close())
		require.NoError(t, err)
		require.Greater(t, img.Bounds().Dx(), 100)
		require.Greater(t, img.Bounds().Dy(), 100)
	}
}
