// Package chart draws the PNG charts of Skiff's benchmark reports with
// gonum.org/v1/plot: grouped bars and lines, each optionally on a
// logarithmic value axis (the spread between engines is often several
// orders of magnitude).
package chart

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Width and Height are the size of every chart.
const (
	Width  = 9 * vg.Inch
	Height = 4.5 * vg.Inch
)

// Series is one named row of values, one per category or x point. NaN
// marks a missing value.
type Series struct {
	Name string
	X    []float64 // for Lines only
	Y    []float64
}

// Options are the labels and scale of a chart.
type Options struct {
	Title  string
	XLabel string
	YLabel string
	LogY   bool
}

func newPlot(o Options) *plot.Plot {
	p := plot.New()
	p.Title.Text = o.Title
	p.X.Label.Text = o.XLabel
	p.Y.Label.Text = o.YLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if o.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	return p
}

// Lines writes a line chart with one line per series to path.
func Lines(path string, o Options, series []Series) error {
	p := newPlot(o)
	for i, s := range series {
		var pts plotter.XYs
		for j := range s.Y {
			if !math.IsNaN(s.Y[j]) && (!o.LogY || s.Y[j] > 0) {
				pts = append(pts, plotter.XY{X: s.X[j], Y: s.Y[j]})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, dots, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("chart %s: %w", path, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(0)
		dots.Color = plotutil.Color(i)
		dots.Shape = plotutil.Shape(i)
		p.Add(l, dots)
		p.Legend.Add(s.Name, l, dots)
	}
	return save(p, path)
}

// Bars writes a grouped bar chart: one group per category, one bar per
// series within it.
func Bars(path string, o Options, categories []string, series []Series) error {
	p := newPlot(o)
	n := float64(len(series))
	width := 0.8 / n
	for i, s := range series {
		b := &bars{values: s.Y, offset: -0.4 + width*(float64(i)+0.5), width: width, color: plotutil.Color(i), logY: o.LogY}
		p.Add(b)
		p.Legend.Add(s.Name, b)
	}
	p.NominalX(categories...)
	p.X.Min, p.X.Max = -0.6, float64(len(categories))-0.4
	if o.LogY {
		lo := math.Inf(1)
		for _, s := range series {
			for _, v := range s.Y {
				if v > 0 {
					lo = math.Min(lo, v)
				}
			}
		}
		if !math.IsInf(lo, 1) {
			p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
		}
	}
	return save(p, path)
}

func save(p *plot.Plot, path string) error {
	if _, ok := p.Y.Scale.(plot.LogScale); ok && (p.Y.Min <= 0 || p.Y.Max <= p.Y.Min) {
		// Nothing positive to draw: keep the log axis valid.
		p.Y.Min, p.Y.Max = 1, 10
	}
	if err := p.Save(Width, Height, path); err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return nil
}

// bars is one series of a grouped bar chart. It draws its own rectangles
// from the bottom of the axis, which gonum's BarChart cannot do on a log
// scale (it starts every bar at zero).
type bars struct {
	values []float64
	offset float64 // x offset of this series within a category
	width  float64 // in category units
	color  color.Color
	logY   bool
}

func (b *bars) ok(v float64) bool { return !math.IsNaN(v) && (!b.logY || v > 0) }

// Plot implements plot.Plotter.
func (b *bars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, v := range b.values {
		if !b.ok(v) {
			continue
		}
		x := float64(i) + b.offset
		x0, x1 := trX(x-b.width/2), trX(x+b.width/2)
		y0, y1 := trY(p.Y.Min), trY(math.Min(v, p.Y.Max))
		rect := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		c.FillPolygon(b.color, c.ClipPolygonY(rect))
	}
}

// DataRange implements plot.DataRanger.
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = -0.5, float64(len(b.values))-0.5
	ymin, ymax = math.Inf(1), math.Inf(-1)
	for _, v := range b.values {
		if b.ok(v) {
			ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
		}
	}
	if math.IsInf(ymin, 1) {
		return xmin, xmax, 1, 1
	}
	if !b.logY {
		ymin = 0
	}
	return xmin, xmax, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer, for the legend.
func (b *bars) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(b.color, c.ClipPolygonY(pts))
}
