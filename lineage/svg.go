package lineage

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/goccy/go-graphviz"

	"github.com/refill-dev/refill"
)

// Graphviz runs as one WebAssembly module per process (go-graphviz compiles
// it in its package init and every call — parsing, layout, rendering, the
// "last error" — goes through that single module instance and its one
// linear memory). An instance is therefore not safe for concurrent use, and
// neither are two instances: renders are serialised behind one lock, and
// the expensive context (its plugins) is made once and kept.
var render struct {
	sync.Mutex
	gv *graphviz.Graphviz
}

// SVG renders DOT text as SVG with Graphviz's dot layout. It is safe for
// concurrent use; renders run one at a time. A DOT text Graphviz cannot
// parse is bad input.
func SVG(ctx context.Context, dot string) ([]byte, error) {
	return layout(ctx, dot, graphviz.SVG)
}

// layout lays dot out with Graphviz and writes it in format (svg, or json
// for the drawing operations PNG draws).
func layout(ctx context.Context, dot string, format graphviz.Format) ([]byte, error) {
	render.Lock()
	defer render.Unlock()
	// The module does not watch ctx, so a request that gave up while it
	// waited for the lock is not rendered at all.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if render.gv == nil {
		gv, err := graphviz.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("lineage: starting graphviz: %w", err)
		}
		render.gv = gv
	}
	g, err := graphviz.ParseBytes([]byte(dot))
	if err != nil {
		return nil, badDOT(err)
	}
	if g == nil {
		return nil, badDOT(fmt.Errorf("no graph"))
	}
	defer g.Close()
	var buf bytes.Buffer
	if err := render.gv.Render(ctx, g, format, &buf); err != nil {
		return nil, fmt.Errorf("lineage: rendering %s: %w", format, err)
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("lineage: rendering %s: graphviz wrote nothing", format)
	}
	return buf.Bytes(), nil
}

// badDOT is a DOT text Graphviz refused: the picture's maker is wrong, and
// the message says where Graphviz stopped.
func badDOT(err error) error {
	return refill.BadInputf("lineage: graphviz cannot read the DOT text: %v", err)
}
