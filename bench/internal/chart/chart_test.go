package chart_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/bench/internal/chart"
)

func TestChartsWritePNGs(t *testing.T) {
	dir := t.TempDir()
	bars := filepath.Join(dir, "bars.png")
	require.NoError(t, chart.Bars(bars, chart.Options{Title: "t", YLabel: "ns", LogY: true},
		[]string{"a", "b", "c"},
		[]chart.Series{{Name: "x", Y: []float64{1, 1000, math.NaN()}}, {Name: "y", Y: []float64{5, 0, 1e6}}}))
	lines := filepath.Join(dir, "lines.png")
	require.NoError(t, chart.Lines(lines, chart.Options{Title: "t", XLabel: "g", YLabel: "ms"},
		[]chart.Series{{Name: "x", X: []float64{2, 4, 8}, Y: []float64{1, 2, math.NaN()}}}))
	for _, p := range []string{bars, lines} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, "\x89PNG", string(b[:4]), p)
	}
}

func TestPercentilesChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.png")
	require.NoError(t, chart.Percentiles(path, chart.Options{Title: "latency", XLabel: "percentile", YLabel: "ms", LogY: true},
		[]chart.Series{{Name: "a", X: []float64{0, 50, 90, 99, 99.9, 99.99, 99.999, 99.9999, 100}, Y: []float64{0.1, 0.2, 0.3, 0.5, 1, 2, 5, 10, 20}}}))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "\x89PNG", string(b[:4]))
}
