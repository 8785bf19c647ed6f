package chart

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// maxNines is where the percentile axis ends: 99.9999% is six nines.
const maxNines = 6

// nines maps a percentile to its position on a 1/(1-p) log axis: 90% is
// 1, 99% is 2, 99.9999% is 6. 100% sits just past the last mark.
func nines(p float64) float64 {
	if p >= 100 {
		return maxNines + 0.3
	}
	return -math.Log10(1 - p/100)
}

// ninesTicks labels the percentile axis at 0%, 90%, 99%, 99.9%, ...
type ninesTicks struct{}

func (ninesTicks) Ticks(min, max float64) []plot.Tick {
	labels := []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"}
	var t []plot.Tick
	for i, l := range labels {
		if v := float64(i); v >= min && v <= max {
			t = append(t, plot.Tick{Value: v, Label: l})
		}
	}
	return t
}

// Percentiles writes a latency distribution chart: for each series, X
// holds percentiles (0-100) and Y latencies, drawn against a 1/(1-p)
// percentile axis so that the tail up to 99.9999% is as visible as the
// median.
func Percentiles(path string, o Options, series []Series) error {
	p := newPlot(o)
	p.X.Tick.Marker = ninesTicks{}
	p.X.Min, p.X.Max = 0, maxNines+0.3
	for i, s := range series {
		var pts plotter.XYs
		for j := range s.Y {
			if math.IsNaN(s.Y[j]) || (o.LogY && s.Y[j] <= 0) || s.X[j] < 0 {
				continue
			}
			pts = append(pts, plotter.XY{X: nines(s.X[j]), Y: s.Y[j]})
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("chart %s: %w", path, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		l.Width = 1.5
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	return save(p, path)
}
