package lineage

import (
	"context"
	"errors"

	"github.com/refill-dev/refill"
)

// SVG renders DOT text as SVG with Graphviz. (Stub: replaced by the
// go-graphviz implementation.)
func SVG(ctx context.Context, dot string) ([]byte, error) {
	return nil, errors.New("lineage: SVG not implemented yet")
}

// PlanDOT is a plan's lineage picture as DOT. (Stub.)
func PlanDOT(p *refill.Plan, cfg *refill.Config) (string, error) {
	return "", errors.New("lineage: PlanDOT not implemented yet")
}
