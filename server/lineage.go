package server

import (
	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/lineage"
)

// PlanDOT is a plan's lineage picture, drawn from what it sealed.
func PlanDOT(p *refill.Plan, cfg *refill.Config) (string, error) {
	return lineage.PlanDOT(p, cfg)
}
