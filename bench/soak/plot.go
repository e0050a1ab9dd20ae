package main

import (
	"fmt"
	"image/color"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plot draws four stacked panels over the run's seconds: RSS, Go heap in
// use and goroutines per node, and the p99 latency of each second, with
// dashed vertical lines where a phase (cold, warm-up, baseline, load,
// settle) ends.
func (r *report) plot(path string) error {
	rss, heap, gor, p99 := plot.New(), plot.New(), plot.New(), plot.New()
	rss.Title.Text = fmt.Sprintf("mcpswarm soak, 3 nodes: %s, %.0f s of load", strings.Fields(r.Knobs)[0], r.LoadSeconds)
	rss.Y.Label.Text = "RSS (MiB)"
	heap.Y.Label.Text = "Go heap in use (MiB)"
	gor.Y.Label.Text = "goroutines"
	p99.Y.Label.Text = "p99 of the second (ms)"
	p99.X.Label.Text = "seconds (baseline, load, settle)"
	for i, name := range r.Nodes {
		rs, hs, gs := make(plotter.XYs, len(r.Series)), make(plotter.XYs, len(r.Series)), make(plotter.XYs, len(r.Series))
		for j, s := range r.Series {
			rs[j] = plotter.XY{X: s.T, Y: mib(s.RSSKB[i])}
			hs[j] = plotter.XY{X: s.T, Y: mib(s.HeapKB[i])}
			gs[j] = plotter.XY{X: s.T, Y: float64(s.Goroutines[i])}
		}
		for _, pl := range []struct {
			p  *plot.Plot
			xy plotter.XYs
		}{{rss, rs}, {heap, hs}, {gor, gs}} {
			l, err := plotter.NewLine(pl.xy)
			if err != nil {
				return err
			}
			l.Color = plotutil.Color(i)
			pl.p.Add(l)
			pl.p.Legend.Add(name, l)
		}
	}
	var ps plotter.XYs
	for _, s := range r.Series {
		if s.Calls > 0 {
			ps = append(ps, plotter.XY{X: s.T, Y: s.P99ms})
		}
	}
	if len(ps) > 0 {
		l, err := plotter.NewLine(ps)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(3)
		p99.Add(l)
	}
	// Phase boundaries.
	var marks []float64
	for j := 1; j < len(r.Series); j++ {
		if r.Series[j].Phase != r.Series[j-1].Phase {
			marks = append(marks, r.Series[j].T)
		}
	}
	for _, p := range []*plot.Plot{rss, heap, gor, p99} {
		p.Legend.Top, p.Legend.Left = true, true
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		for _, x := range marks {
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: p.Y.Max}})
			if err != nil {
				return err
			}
			l.Color = color.Gray{Y: 120}
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
		}
	}
	img := vgsvg.New(9*vg.Inch, 11*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 4, Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 2 * vg.Millimeter}
	grid := [][]*plot.Plot{{rss}, {heap}, {gor}, {p99}}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		grid[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
