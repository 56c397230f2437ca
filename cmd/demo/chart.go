package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/lowwater/lowwater/wal"
)

// maxChartPanels bounds the chart's height: the first pchannels only.
const maxChartPanels = 6

// Colours of the chart: the minimum, the persisted checkpoint, failed
// saves, the outage shading and the marker of the end of the updates.
var (
	colMinimum   = color.NRGBA{R: 31, G: 119, B: 180, A: 255}
	colPersisted = color.NRGBA{R: 255, G: 127, B: 14, A: 255}
	colFailed    = color.NRGBA{R: 214, G: 39, B: 40, A: 255}
	colOutage    = color.NRGBA{R: 214, G: 39, B: 40, A: 45}
	colMarker    = color.NRGBA{R: 110, G: 110, B: 110, A: 255}
	colStall     = color.NRGBA{R: 148, G: 103, B: 189, A: 70}
	colStallText = color.NRGBA{R: 100, G: 60, B: 140, A: 255}
)

// chartFormat returns "svg" or "png" from the file name.
func chartFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg", ".png":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("--chart %q: want a .svg or .png file", path)
	}
}

// writeChart draws, for each pchannel (the first maxChartPanels), the
// minimum and the persisted checkpoint over the run, failed saves as
// crosses at the value they tried, and the catalog's outages shaded.
func writeChart(path, title string, tl *timeline) (err error) {
	format, err := chartFormat(path)
	if err != nil {
		return err
	}
	names := tl.names
	if len(names) > maxChartPanels {
		names = names[:maxChartPanels]
	}
	plots := make([][]*plot.Plot, len(names))
	var legend []legendEntry
	for i, name := range names {
		p, l, err := panel(tl, name)
		if err != nil {
			return err
		}
		if i == 0 {
			legend = l
		}
		if i == len(names)-1 {
			p.X.Label.Text = "seconds since the demo started"
		}
		plots[i] = []*plot.Plot{p}
	}

	// A strip on top for the title and the legend, so that neither hides
	// a line; the panels below it.
	// The left legend has the lines (and the stalls, when detected: one
	// row more); the right one, bottom-aligned, the faults, clear of the
	// left one's long first row.
	left := 3
	strip := 0.95 * vg.Inch
	if tl.stallAfter > 0 {
		left, strip = 4, strip+0.18*vg.Inch
	}
	w, h := 10*vg.Inch, vg.Length(len(names))*2.3*vg.Inch+strip
	var canvas vg.CanvasWriterTo
	switch format {
	case "svg":
		canvas = vgsvg.New(w, h)
	default:
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110),
			vgimg.UseBackgroundColor(color.White))}
	}
	dc := draw.New(canvas)
	head := draw.Crop(dc, 12*vg.Millimeter, 0, h-strip, 0)
	titleStyle := plot.New().Title.TextStyle
	titleStyle.XAlign, titleStyle.YAlign = draw.XLeft, draw.YTop
	head.FillText(titleStyle, vg.Point{X: head.Min.X, Y: head.Max.Y - 2*vg.Millimeter}, title)
	// Two legends side by side: the lines, then the faults.
	area := draw.Crop(head, 0, 0, 0, -8*vg.Millimeter)
	half := (area.Max.X - area.Min.X) / 2
	for i, part := range [][]legendEntry{legend[:left], legend[left:]} {
		l := plot.NewLegend()
		l.Top, l.Left, l.YOffs, l.Padding = false, true, vg.Millimeter, vg.Points(2.5)
		for _, e := range part {
			l.Add(e.name, e.thumb)
		}
		if i == 0 {
			l.Draw(draw.Crop(area, 0, -half, 0, 0))
		} else {
			l.Draw(draw.Crop(area, half, 0, 0, 0))
		}
	}
	tiles := draw.Tiles{Rows: len(names), Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	for i, cs := range plot.Align(plots, tiles, draw.Crop(dc, 0, 0, 0, -strip)) {
		plots[i][0].Draw(cs[0])
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	_, err = canvas.WriteTo(f)
	return err
}

// legendEntry is one line of the legend.
type legendEntry struct {
	name  string
	thumb plot.Thumbnailer
}

// panel is one pchannel's plot, and the legend of what it draws.
func panel(tl *timeline, name string) (*plot.Plot, []legendEntry, error) {
	t := tl.tracks[name]
	p := plot.New()
	p.Y.Label.Text = name + "  (kafka offset)"
	p.X.Min = 0
	p.X.Max = max(tl.stopAt, lastAt(t)).Seconds()
	p.X.Tick.Marker = secondTicks{}
	ax := newOffsetAxis(t.minimum, t.persisted, t.failed)
	p.Y.Tick.Marker = ax
	p.Add(plotter.NewGrid())

	spans := make([][2]float64, 0, len(tl.outages))
	for _, s := range tl.outages {
		spans = append(spans, [2]float64{s.from.Seconds(), s.to.Seconds()})
	}
	shading := shade{spans: spans, color: colOutage}
	p.Add(shading)
	stalls := stallShade{shade: shade{color: colStall}}
	for _, s := range t.stalls {
		to := s.to
		if to < 0 {
			to = max(tl.stopAt, lastAt(t)) // it lasted to the end
		}
		stalls.spans = append(stalls.spans, [2]float64{s.from.Seconds(), to.Seconds()})
		stalls.holders = append(stalls.holders, s.holder)
	}
	p.Add(stalls)

	minimum, err := stepLine(ax.xys(t.minimum), p.X.Max, colMinimum, 1.2)
	if err != nil {
		return nil, nil, err
	}
	persisted, err := stepLine(ax.xys(t.persisted), p.X.Max, colPersisted, 2.2)
	if err != nil {
		return nil, nil, err
	}
	p.Add(persisted, minimum) // the thin minimum over the thick persisted line

	var failed *plotter.Scatter
	if len(t.failed) > 0 {
		failed, err = plotter.NewScatter(ax.xys(t.failed))
		if err != nil {
			return nil, nil, err
		}
		failed.GlyphStyle = draw.GlyphStyle{Color: colFailed, Radius: 2.5, Shape: draw.CrossGlyph{}}
		p.Add(failed)
	}
	if tl.healAt > 0 {
		p.Add(vline{x: tl.healAt.Seconds(), color: colMarker})
	}

	legend := []legendEntry{
		{"minimum over the vchannels (an Add below it dips it under the persisted line: by design, never saved)", minimum},
		{"persisted checkpoint", persisted},
		{"failed save, at the value it tried", glyph{Color: colFailed, Radius: 2.5, Shape: draw.CrossGlyph{}}},
	}
	if tl.stallAfter > 0 {
		legend = append(legend, legendEntry{fmt.Sprintf("stall: no rise for %v, shaded from the last rise; holder on top", tl.stallAfter), stalls.shade})
	}
	legend = append(legend,
		legendEntry{"catalog down (an outage)", shading},
		legendEntry{"updates stop, faults end", vline{color: colMarker}})
	return p, legend, nil
}

// stallShade shades the stalls and names each one's holder at its top.
type stallShade struct {
	shade
	holders []string
}

func (s stallShade) Plot(c draw.Canvas, p *plot.Plot) {
	s.shade.Plot(c, p)
	trX, _ := p.Transforms(&c)
	style := plot.New().Legend.TextStyle
	style.Color = colStallText
	style.XAlign, style.YAlign = draw.XLeft, draw.YTop
	for i, sp := range s.spans {
		x := trX(sp[0]) + vg.Points(2)
		if x < c.Max.X {
			c.FillText(style, vg.Point{X: x, Y: c.Max.Y - vg.Points(2)}, s.holders[i])
		}
	}
}

// glyph is a legend swatch of one glyph.
type glyph draw.GlyphStyle

func (g glyph) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(draw.GlyphStyle(g), vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: (c.Min.Y + c.Max.Y) / 2})
}

func lastAt(t *track) (last time.Duration) {
	for _, s := range [][]sample{t.minimum, t.persisted} {
		if n := len(s); n > 0 {
			last = max(last, s[n-1].at)
		}
	}
	return last
}

// offsetAxis draws offsets as their distance from base, a round number at
// or below the lowest one shown: near the largest offset a float64 steps
// by 1024, so offsets drawn as they are round together, and labels made
// from such floats name offsets above the largest. Distances stay small,
// and labels are computed in integers. When the offsets start near 0,
// base is 0 and the axis is the one the offsets would draw themselves.
type offsetAxis struct {
	base wal.KafkaID
	// lo and hi are the lowest and highest offsets shown, less base.
	lo, hi uint64
}

func newOffsetAxis(series ...[]sample) offsetAxis {
	var lo, hi wal.KafkaID
	seen := false
	for _, s := range series {
		for _, v := range s {
			if !seen || v.v < lo {
				lo = v.v
			}
			if !seen || v.v > hi {
				hi = v.v
			}
			seen = true
		}
	}
	// unit is the smallest power of ten not below the span (in uint64, as
	// the span of two int64s may not fit one); base is lo rounded down to
	// it, or lo itself where that would go below the smallest int64.
	span := uint64(hi) - uint64(lo)
	unit := wal.KafkaID(1)
	for uint64(unit) < span && unit <= math.MaxInt64/10 {
		unit *= 10
	}
	base := lo - lo%unit
	if base > lo {
		if base < math.MinInt64+unit {
			base = lo
		} else {
			base -= unit
		}
	}
	return offsetAxis{base: base, lo: uint64(lo) - uint64(base), hi: uint64(hi) - uint64(base)}
}

// y is where offset v is drawn.
func (a offsetAxis) y(v wal.KafkaID) float64 { return float64(uint64(v) - uint64(a.base)) }

func (a offsetAxis) xys(s []sample) plotter.XYs {
	pts := make(plotter.XYs, len(s))
	for i, v := range s {
		pts[i].X, pts[i].Y = v.at.Seconds(), a.y(v.v)
	}
	return pts
}

func (a offsetAxis) label(d uint64) string {
	return strconv.FormatInt(int64(a.base+wal.KafkaID(d)), 10)
}

// Ticks are gonum's default ticks between the lowest and the highest
// offset shown, labelled only at whole offsets; a flat line, which gonum
// widens by 1 either way, has one tick: its offset.
func (a offsetAxis) Ticks(lo, hi float64) []plot.Tick {
	if a.lo == a.hi {
		return []plot.Tick{{Value: float64(a.lo), Label: a.label(a.lo)}}
	}
	var ticks []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(lo, hi) {
		if t.Value < float64(a.lo) || t.Value > float64(a.hi) {
			continue
		}
		d := uint64(t.Value)
		switch {
		case float64(d) != t.Value:
			t.Label = "" // between two offsets: a minor tick
		case d < a.lo || d > a.hi:
			continue // float64(a.lo) or float64(a.hi) rounded
		case t.Label != "":
			t.Label = a.label(d)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// stepLine draws a step function that holds its last value until end.
func stepLine(pts plotter.XYs, end float64, c color.Color, width vg.Length) (*plotter.Line, error) {
	if n := len(pts); n > 0 && pts[n-1].X < end {
		pts = append(pts, plotter.XY{X: end, Y: pts[n-1].Y})
	}
	if len(pts) == 0 {
		pts = plotter.XYs{{X: 0, Y: 0}}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	l.StepStyle = plotter.PostStep
	l.LineStyle.Color = c
	l.LineStyle.Width = width
	return l, nil
}

// plainTicks are gonum's default ticks, labelled without trailing zeros:
// the seconds of a long run.
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}

// secondTicks label every second of a short run, every 5 or 10 of a
// longer one, with a minor tick between.
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
	switch span := hi - lo; {
	case span > 60:
		return plainTicks{}.Ticks(lo, hi)
	case span > 30:
		step = 10
	case span > 15:
		step = 5
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		if mid := v + step/2; mid <= hi {
			ticks = append(ticks, plot.Tick{Value: mid})
		}
	}
	return ticks
}

// shade fills the full height of the plot over each span of x.
type shade struct {
	spans [][2]float64
	color color.Color
}

func (s shade) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, sp := range s.spans {
		x0, x1 := trX(sp[0]), trX(sp[1])
		c.FillPolygon(s.color, c.ClipPolygonXY([]vg.Point{
			{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y},
		}))
	}
}

// Thumbnail draws the legend's swatch.
func (s shade) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(s.color, []vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y},
	})
}

// vline is a dashed vertical line at x.
type vline struct {
	x     float64
	color color.Color
}

func (l vline) style() draw.LineStyle {
	return draw.LineStyle{Color: l.color, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
}

func (l vline) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x := trX(l.x)
	c.StrokeLines(l.style(), c.ClipLinesY([]vg.Point{{X: x, Y: c.Min.Y}, {X: x, Y: c.Max.Y}})...)
}

// Thumbnail draws the legend's swatch.
func (l vline) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(l.style(), c.Min.X, y, c.Max.X, y)
}
