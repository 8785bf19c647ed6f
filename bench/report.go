package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/skiffmq/skiff/bench/internal/chart"
)

// LatencyReport is the JSON form of a latency result; latencies are in
// microseconds, keyed by percentile ("50" ... "99.9999", "100").
type LatencyReport struct {
	Target      string             `json:"target"`
	URL         string             `json:"url,omitempty"`
	Rate        float64            `json:"rate"`
	Size        int                `json:"size"`
	Connections int                `json:"connections"`
	DurationS   float64            `json:"duration_s"`
	Corrected   map[string]float64 `json:"corrected"`
	Uncorrected map[string]float64 `json:"uncorrected"`
	Sent        int64              `json:"sent"`
	Received    int64              `json:"received"`
	Lost        int64              `json:"lost"`
	// BehindUS is how far behind schedule the senders fell at worst.
	BehindUS float64 `json:"behind_us"`
	// Overhead is the harness's own corrected latency at the same rate
	// and connections, against the no-op target, when it was measured.
	Overhead map[string]float64 `json:"harness_overhead,omitempty"`
}

// Report returns the JSON form of r.
func (r *LatencyResult) Report() LatencyReport {
	return LatencyReport{
		Target: r.Target, Rate: r.Rate, Size: r.Size, Connections: r.Connections,
		DurationS: r.Duration.Seconds(), Corrected: r.Corrected.Summary(), Uncorrected: r.Uncorrected.Summary(),
		Sent: r.Sent, Received: r.Received, Lost: r.Lost(),
		BehindUS: float64(r.Behind) / float64(time.Microsecond),
	}
}

// WriteHGRMs writes name-corrected.hgrm and name-uncorrected.hgrm into dir.
func (r *LatencyResult) WriteHGRMs(dir, name string) error {
	for kind, h := range map[string]*Histogram{"corrected": r.Corrected, "uncorrected": r.Uncorrected} {
		f, err := os.Create(filepath.Join(dir, name+"-"+kind+".hgrm"))
		if err != nil {
			return err
		}
		if err := h.WriteHGRM(f); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// PlotLatency draws latency against percentile on a 1/(1-p) axis, one
// line per result (labels name them), corrected latencies solid and, with
// uncorrected set, service times beside them.
func PlotLatency(path, title string, labels []string, results []*LatencyResult, uncorrected bool) error {
	var series []chart.Series
	add := func(name string, h *Histogram) {
		ps, ls := h.Distribution()
		s := chart.Series{Name: name}
		for i := range ps {
			s.X = append(s.X, ps[i])
			s.Y = append(s.Y, float64(ls[i])/float64(time.Millisecond))
		}
		series = append(series, s)
	}
	for i, r := range results {
		add(labels[i], r.Corrected)
	}
	if uncorrected {
		for i, r := range results {
			add(labels[i]+" (service time)", r.Uncorrected)
		}
	}
	return chart.Percentiles(path, chart.Options{Title: title, XLabel: "percentile", YLabel: "latency, ms (log)", LogY: true}, series)
}

// Name is a file-friendly name for a configuration: 1KB-3000rps-1conn.
func Name(size int, rate float64, conns int) string {
	return fmt.Sprintf("%s-%.0frps-%dconn", SizeName(size), rate, conns)
}

// SizeName writes a size the way the published suite does: 256B, 1KB, 1MB.
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// ParseSize reads 256, 256B, 1KB, 5KB, 1MB (powers of 1024).
func ParseSize(s string) (int, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := 1
	switch {
	case strings.HasSuffix(u, "MB"):
		mult, u = 1<<20, strings.TrimSuffix(u, "MB")
	case strings.HasSuffix(u, "KB"):
		mult, u = 1<<10, strings.TrimSuffix(u, "KB")
	case strings.HasSuffix(u, "B"):
		u = strings.TrimSuffix(u, "B")
	}
	// Atoi, not Sscanf: "1GB" or "1.5KB" must be errors, not 1 and 1024.
	n, err := strconv.Atoi(strings.TrimSpace(u))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bench: bad size %q", s)
	}
	return n * mult, nil
}
