package lineage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/fogleman/gg"
	"github.com/golang/freetype/truetype"
	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
)

// pngScale is pixels per point of Graphviz's layout (72 points an inch):
// 1.5 draws at 108 dpi, sharp on a chat client's retina preview.
const pngScale = 1.5

// PNG renders DOT text as a PNG picture: Graphviz lays the graph out and
// says how to draw it (its JSON output carries the xdot drawing operations:
// shapes, splines, arrowheads, text and their colours), and refill draws
// that with a Go 2D library and the Go fonts. Graphviz's own PNG output
// draws text badly here, and a chat client shows a PNG where it shows no
// SVG. It is safe for concurrent use.
func PNG(ctx context.Context, dot string) ([]byte, error) {
	out, err := layout(ctx, dot, "json")
	if err != nil {
		return nil, err
	}
	var g xdotGraph
	if err := json.Unmarshal(out, &g); err != nil {
		return nil, fmt.Errorf("lineage: reading graphviz's layout: %w", err)
	}
	bb, err := floats(g.BB, 4)
	if err != nil {
		return nil, fmt.Errorf("lineage: graphviz's bounding box %q: %w", g.BB, err)
	}
	const margin = 8
	w, h := (bb[2]-bb[0])*pngScale+2*margin, (bb[3]-bb[1])*pngScale+2*margin
	if w < 1 || h < 1 || w > 16000 || h > 16000 {
		return nil, fmt.Errorf("lineage: a picture of %.0f×%.0f pixels is not drawn", w, h)
	}
	d := &drawer{dc: gg.NewContext(int(math.Ceil(w)), int(math.Ceil(h))), x0: bb[0], y1: bb[3], margin: margin, size: 14}
	d.dc.SetColor(color.White)
	d.dc.Clear()
	d.run(g.Draw)
	for _, o := range g.Objects {
		d.run(o.Draw)
		d.run(o.LDraw)
	}
	for _, e := range g.Edges {
		d.run(e.Draw)
		d.run(e.HDraw)
		d.run(e.TDraw)
		d.run(e.LDraw)
	}
	d.run(g.LDraw)
	var buf bytes.Buffer
	if err := png.Encode(&buf, d.dc.Image()); err != nil {
		return nil, fmt.Errorf("lineage: encoding PNG: %w", err)
	}
	return buf.Bytes(), nil
}

// xdotGraph is the part of Graphviz's JSON output that draws the picture.
type xdotGraph struct {
	BB      string       `json:"bb"`
	Draw    []xdotOp     `json:"_draw_"`
	LDraw   []xdotOp     `json:"_ldraw_"`
	Objects []xdotObject `json:"objects"`
	Edges   []xdotObject `json:"edges"`
}

type xdotObject struct {
	Draw  []xdotOp `json:"_draw_"`
	LDraw []xdotOp `json:"_ldraw_"`
	HDraw []xdotOp `json:"_hdraw_"`
	TDraw []xdotOp `json:"_tdraw_"`
}

// xdotOp is one xdot drawing operation, as Graphviz's JSON writes it.
type xdotOp struct {
	Op     string       `json:"op"`
	Color  string       `json:"color"`
	Points [][2]float64 `json:"points"`
	Rect   []float64    `json:"rect"`
	Size   float64      `json:"size"`
	Face   string       `json:"face"`
	Pt     []float64    `json:"pt"`
	Align  string       `json:"align"`
	Width  float64      `json:"width"`
	Text   string       `json:"text"`
	Style  string       `json:"style"`
}

type drawer struct {
	dc         *gg.Context
	x0, y1     float64
	margin     float64
	pen, fill  color.Color
	size       float64
	bold       bool
	lineWidth  float64
	dashes     []float64
	penNone    bool
	fillNone   bool
	fontFailed error
}

// at maps a layout point (points, y up) to the picture's pixels (y down).
func (d *drawer) at(p [2]float64) (float64, float64) {
	return (p[0]-d.x0)*pngScale + d.margin, (d.y1-p[1])*pngScale + d.margin
}

func (d *drawer) run(ops []xdotOp) {
	// Graphviz's xdot swaps B and b on rounded shapes: a filled rounded
	// box (and a cylinder's body) comes as an unfilled B after its fill
	// colour, an unfilled one as a filled b with no fill colour. So a
	// Bézier is filled when its object set a fill colour and it is closed
	// or says b.
	fillSet := false
	for _, op := range ops {
		switch op.Op {
		case "c":
			d.pen, d.penNone = parseColor(op.Color)
		case "C":
			d.fill, d.fillNone = parseColor(op.Color)
			fillSet = true
		case "S":
			d.style(op.Style)
		case "F":
			d.size, d.bold = op.Size, strings.Contains(strings.ToLower(op.Face), "bold")
		case "P", "p", "L":
			d.path(op.Points, false)
			d.finish(op.Op == "P", op.Op == "P")
		case "B", "b":
			d.path(op.Points, true)
			d.finish(fillSet && (op.Op == "b" || closed(op.Points)), false)
		case "E", "e":
			if len(op.Rect) == 4 {
				x, y := d.at([2]float64{op.Rect[0], op.Rect[1]})
				d.dc.DrawEllipse(x, y, op.Rect[2]*pngScale, op.Rect[3]*pngScale)
				d.finish(op.Op == "E", false)
			}
		case "T":
			d.text(op)
		}
	}
}

// path traces points as straight segments, or as the cubic Bézier pieces
// xdot's B ops carry (a start, then three points per piece).
func (d *drawer) path(pts [][2]float64, bezier bool) {
	if len(pts) == 0 {
		return
	}
	d.dc.NewSubPath()
	d.dc.MoveTo(d.at(pts[0]))
	if bezier {
		for i := 1; i+2 < len(pts); i += 3 {
			x1, y1 := d.at(pts[i])
			x2, y2 := d.at(pts[i+1])
			x3, y3 := d.at(pts[i+2])
			d.dc.CubicTo(x1, y1, x2, y2, x3, y3)
		}
		return
	}
	for _, p := range pts[1:] {
		d.dc.LineTo(d.at(p))
	}
}

// closed reports whether a path ends where it began.
func closed(pts [][2]float64) bool {
	return len(pts) > 2 && math.Abs(pts[0][0]-pts[len(pts)-1][0]) < 0.01 && math.Abs(pts[0][1]-pts[len(pts)-1][1]) < 0.01
}

// finish fills (in the fill colour) and strokes (in the pen colour) the
// path traced; closed closes it first.
func (d *drawer) finish(filled, closed bool) {
	if closed {
		d.dc.ClosePath()
	}
	if filled && !d.fillNone && d.fill != nil {
		d.dc.SetColor(d.fill)
		d.dc.FillPreserve()
	}
	if d.penNone {
		d.dc.ClearPath()
		return
	}
	d.dc.SetColor(d.penColor())
	d.dc.SetLineWidth(max(d.lineWidth, 1) * pngScale)
	d.dc.SetDash(d.dashes...)
	d.dc.Stroke()
	d.dc.SetDash()
}

func (d *drawer) penColor() color.Color {
	if d.pen == nil {
		return color.Black
	}
	return d.pen
}

func (d *drawer) style(s string) {
	switch {
	case s == "dashed":
		d.dashes = []float64{6, 4}
	case s == "dotted":
		d.dashes = []float64{2, 3}
	case s == "solid":
		d.dashes = nil
	case s == "bold":
		d.lineWidth = 2
	case strings.HasPrefix(s, "setlinewidth("):
		if v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(s, "setlinewidth("), ")"), 64); err == nil {
			d.lineWidth = v
		}
	}
}

// text draws a T op: its point is the baseline, aligned left (l), centred
// (c) or right (r) on it.
func (d *drawer) text(op xdotOp) {
	if len(op.Pt) != 2 || op.Text == "" || d.penNone {
		return
	}
	face, err := goFace(d.size*pngScale, d.bold)
	if err != nil {
		d.fontFailed = err
		return
	}
	d.dc.SetFontFace(face)
	d.dc.SetColor(d.penColor())
	ax := 0.5
	switch op.Align {
	case "l":
		ax = 0
	case "r":
		ax = 1
	}
	// The Go font is wider than the one Graphviz measured with: a text
	// wider than the room Graphviz gave it is drawn smaller, to fit.
	if room := op.Width * pngScale; room > 0 {
		if w, _ := d.dc.MeasureString(op.Text); w > room {
			if smaller, err := goFace(d.size*pngScale*room/w, d.bold); err == nil {
				d.dc.SetFontFace(smaller)
			}
		}
	}
	x, y := d.at([2]float64{op.Pt[0], op.Pt[1]})
	d.dc.DrawStringAnchored(op.Text, x, y, ax, 0)
}

// goFace is the Go font at size pixels, regular or bold, made once.
func goFace(size float64, bold bool) (font.Face, error) {
	key := fmt.Sprintf("%.1f/%v", size, bold)
	faces.Lock()
	defer faces.Unlock()
	if f, ok := faces.m[key]; ok {
		return f, nil
	}
	ttf := goregular.TTF
	if bold {
		ttf = gobold.TTF
	}
	parsed, err := truetype.Parse(ttf)
	if err != nil {
		return nil, err
	}
	f := truetype.NewFace(parsed, &truetype.Options{Size: size, DPI: 72})
	if faces.m == nil {
		faces.m = map[string]font.Face{}
	}
	faces.m[key] = f
	return f, nil
}

var faces struct {
	sync.Mutex
	m map[string]font.Face
}

// parseColor reads an xdot colour: #rrggbb, #rrggbbaa, or one of the few
// names Graphviz writes for the pictures refill makes. none says the
// colour draws nothing (transparent, or "none").
func parseColor(s string) (c color.Color, none bool) {
	s = strings.TrimSpace(strings.ToLower(s))
	if strings.HasPrefix(s, "#") && (len(s) == 7 || len(s) == 9) {
		v, err := strconv.ParseUint(s[1:], 16, 32)
		if err == nil {
			if len(s) == 7 {
				return color.NRGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255}, false
			}
			a := uint8(v)
			return color.NRGBA{uint8(v >> 24), uint8(v >> 16), uint8(v >> 8), a}, a == 0
		}
	}
	for _, gray := range []string{"gray", "grey"} {
		if n, err := strconv.Atoi(strings.TrimPrefix(s, gray)); err == nil && strings.HasPrefix(s, gray) && n >= 0 && n <= 100 {
			v := uint8(math.Round(float64(n) * 255 / 100))
			return color.NRGBA{v, v, v, 255}, false
		}
	}
	switch s {
	case "none", "transparent", "invis":
		return nil, true
	case "white":
		return color.White, false
	case "red":
		return color.NRGBA{255, 0, 0, 255}, false
	case "gray", "grey":
		return color.NRGBA{190, 190, 190, 255}, false
	}
	return color.Black, false
}

// floats reads n comma-separated numbers.
func floats(s string, n int) ([]float64, error) {
	parts := strings.Split(s, ",")
	if len(parts) != n {
		return nil, fmt.Errorf("want %d numbers", n)
	}
	out := make([]float64, n)
	for i, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
