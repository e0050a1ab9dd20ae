package main

import (
	"fmt"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// charts draws grouped bar charts (one group per concurrency, one bar per
// series, medians over rounds) into dir and returns their file names.
func (r *report) charts(dir string) ([]string, error) {
	specs := []struct {
		file, title, y string
		m              metric
	}{
		{"compare-throughput.svg", "Throughput (median of rounds; higher is better)", "calls/s", mTput},
		{"compare-p99.svg", "p99 latency (median of rounds; lower is better)", "µs", mP99},
		{"compare-cpu.svg", "Server CPU per call (median of rounds; lower is better)", "µs CPU per call", mCPU},
	}
	var names []string
	for _, s := range specs {
		if err := r.barChart(filepath.Join(dir, s.file), s.title, s.y, s.m); err != nil {
			return nil, fmt.Errorf("drawing %s: %w", s.file, err)
		}
		names = append(names, s.file)
	}
	return names, nil
}

func (r *report) barChart(path, title, ylabel string, m metric) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.X.Label.Text = "concurrent clients"
	p.Legend.Top = true
	p.Legend.Left = false
	w := vg.Points(11)
	n := len(r.Series)
	for i, s := range r.Series {
		vals := make(plotter.Values, len(r.Conc))
		for j, c := range r.Conc {
			vals[j] = r.value(s.Key, c, m).Med
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(2*i-(n-1)) / 2
		p.Add(bars)
		p.Legend.Add(s.key(), bars)
	}
	labels := make([]string, len(r.Conc))
	for j, c := range r.Conc {
		labels[j] = strconv.Itoa(c)
	}
	p.NominalX(labels...)
	// Room for the outer bars of the first and last groups, and on the
	// right for the legend, which would otherwise cover bars.
	p.X.Min = -0.6
	p.X.Max = float64(len(r.Conc)) - 0.4 + 0.7
	p.Y.Min = 0
	return p.Save(8*vg.Inch, 3.6*vg.Inch, path)
}

func (s seriesInfo) key() string { return s.Key }
