package lineage_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/lineage"
)

// TestPlanPNG: the plan's lineage as a PNG decodes, has a sane size, is
// not blank, carries text, and shows the gated source in the gate's
// colour: red when it failed, green when it passed.
func TestPlanPNG(t *testing.T) {
	cfg := demoConfig(t)
	passed := refill.GateVerdict{Passed: true, Checked: []string{"events_raw"}}
	for _, tc := range []struct {
		name       string
		plan       *refill.Plan
		gate, not  color.NRGBA
		gateColour string
	}{
		{"failed", blocked(t, cfg), rgb(0xffd6d6), rgb(0xd8f3dc), "red"},
		{"passed", planOf(t, cfg, "p-sessions", refill.TierSemiAuto, 14, passed, "sessions"), rgb(0xd8f3dc), rgb(0xffd6d6), "green"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dot, err := lineage.PlanDOT(tc.plan, cfg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := lineage.PNG(context.Background(), dot)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			w, h := img.Bounds().Dx(), img.Bounds().Dy()
			if w < 200 || h < 100 || w > 6000 || h > 6000 {
				t.Errorf("%d×%d pixels", w, h)
			}
			count := pixels(img)
			total := w * h
			if nonWhite := total - count[rgb(0xffffff)]; nonWhite < total/50 {
				t.Errorf("%d of %d pixels drawn: blank", nonWhite, total)
			}
			dark := 0
			for c, n := range count {
				if int(c.R)+int(c.G)+int(c.B) < 200 {
					dark += n
				}
			}
			if dark < 500 {
				t.Errorf("%d dark pixels: no text or lines", dark)
			}
			if count[tc.gate] < 200 {
				t.Errorf("the source is not %s: %d pixels of %v", tc.gateColour, count[tc.gate], tc.gate)
			}
			if count[tc.not] > 0 {
				t.Errorf("%d pixels of the other verdict's colour %v", count[tc.not], tc.not)
			}
		})
	}
}

func rgb(v uint32) color.NRGBA { return color.NRGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255} }

func pixels(img image.Image) map[color.NRGBA]int {
	out := map[color.NRGBA]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			out[c]++
		}
	}
	return out
}
