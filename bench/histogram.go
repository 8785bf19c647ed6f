package bench

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Percentiles are the points every latency report gives.
var Percentiles = []float64{50, 90, 99, 99.9, 99.99, 99.999, 99.9999, 100}

// The range and precision of every latency histogram: 1 µs to 1 minute,
// three significant digits, recorded in nanoseconds.
const (
	minLatency = time.Microsecond
	maxLatency = time.Minute
	sigFigs    = 3
)

// Histogram is an HDR histogram of latencies. It is not safe for
// concurrent use; merge per-goroutine histograms instead.
type Histogram struct {
	h       *hdrhistogram.Histogram
	clamped int64 // samples outside the range, recorded at its edge
}

// NewHistogram returns an empty latency histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(int64(minLatency), int64(maxLatency), sigFigs)}
}

// Record adds one latency. Latencies below 1 µs count as 1 µs and above a
// minute as a minute; Clamped reports how many there were.
func (h *Histogram) Record(d time.Duration) {
	if d < minLatency || d > maxLatency {
		h.clamped++
		d = max(minLatency, min(d, maxLatency))
	}
	_ = h.h.RecordValue(int64(d)) // in range by construction
}

// Merge adds every sample of o.
func (h *Histogram) Merge(o *Histogram) {
	h.h.Merge(o.h)
	h.clamped += o.clamped
}

// Count returns the number of samples.
func (h *Histogram) Count() int64 { return h.h.TotalCount() }

// Clamped returns the samples that fell outside 1 µs..1 min.
func (h *Histogram) Clamped() int64 { return h.clamped }

// Percentile returns the latency at percentile p (0 < p <= 100).
func (h *Histogram) Percentile(p float64) time.Duration {
	return time.Duration(h.h.ValueAtQuantile(p))
}

// Summary returns the latency in microseconds at each of Percentiles,
// keyed by the percentile as written ("50", "99.9999", "100").
func (h *Histogram) Summary() map[string]float64 {
	m := make(map[string]float64, len(Percentiles))
	for _, p := range Percentiles {
		m[PercentileKey(p)] = float64(h.Percentile(p)) / float64(time.Microsecond)
	}
	return m
}

// PercentileKey writes a percentile the way reports key it.
func PercentileKey(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }

// WriteHGRM writes the percentile distribution in HdrHistogram's .hgrm
// text format, values in microseconds, which HdrHistogram's plotter and
// other tools read.
func (h *Histogram) WriteHGRM(w io.Writer) error {
	if _, err := h.h.PercentilesPrint(w, 5, float64(time.Microsecond)); err != nil {
		return fmt.Errorf("bench: writing hgrm: %w", err)
	}
	return nil
}

// Distribution returns (percentile, latency) points for plotting: HDR's
// own percentile iteration, which has more points where the tail needs
// them.
func (h *Histogram) Distribution() (percentiles []float64, latencies []time.Duration) {
	for _, b := range h.h.CumulativeDistributionWithTicks(5) {
		percentiles = append(percentiles, b.Quantile)
		latencies = append(latencies, time.Duration(b.ValueAt))
	}
	return percentiles, latencies
}
