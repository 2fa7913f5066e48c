package policy

import (
	"fmt"

	"github.com/refill-dev/refill"
)

// consumersNamed bounds how many consumers get a reason of their own; the
// plan's consumers list has them all.
const consumersNamed = 5

// consumerReasons says, for each consumer outside refill that reads a
// dataset the plan rewrites, that nothing will rebuild it. Such a plan is
// never auto: whoever owns the consumer should hear of the backfill before
// their table or dashboard shows the new rows beside the old ones.
func consumerReasons(cs []refill.Consumer) []string {
	var out []string
	for i, c := range cs {
		if i == consumersNamed {
			out = append(out, fmt.Sprintf("%d more consumers outside refill read datasets this plan rewrites (see the plan's consumers): not rebuilt", len(cs)-consumersNamed))
			break
		}
		job := c.Job
		if job == "" {
			job = c.JobNamespace
		}
		// The names are what an OpenLineage producer sent: kept on one
		// line, so a name cannot add lines of its own to the reasons.
		out = append(out, fmt.Sprintf("%s is read by %s (job %s, seen %s), a consumer outside refill: not rebuilt",
			c.Reads, refill.OneLine(c.Dataset), refill.OneLine(job), c.LastSeen.UTC().Format("2006-01-02")))
	}
	return out
}
