package refill

import (
	"slices"
	"strings"
)

// WarningGroup is the warnings of one dataset, check and column that say
// the same thing (the words before their first colon, such as
// "insufficient history"), over the partitions they concern: a 17-day
// plan shows one line for the volume check's missing history, not 17.
type WarningGroup struct {
	Dataset, Check, Column string
	// What the warnings say; Example is one whole message.
	What, Example string
	// Partitions in order; First and Last bound them.
	Partitions  []string
	First, Last string
}

// GroupWarnings groups fs's warnings (Finding.Warning), in the order each
// group first appears; other findings are left out.
func GroupWarnings(fs []Finding) []WarningGroup {
	var out []WarningGroup
	at := map[string]int{}
	for _, f := range fs {
		if !f.Warning {
			continue
		}
		what, _, _ := strings.Cut(f.Message, ":")
		key := f.Dataset + "\x00" + f.Check + "\x00" + f.Column + "\x00" + what
		if strings.HasPrefix(what, "on the calendar") {
			// A failure a calendar day turned into a warning says what
			// failed after its first words: each stays its own line.
			key += "\x00" + f.Partition + "\x00" + f.Message
		}
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, WarningGroup{Dataset: f.Dataset, Check: f.Check, Column: f.Column, What: what, Example: f.Message})
		}
		out[i].Partitions = append(out[i].Partitions, f.Partition)
	}
	for i := range out {
		slices.Sort(out[i].Partitions)
		out[i].Partitions = slices.Compact(out[i].Partitions)
		out[i].First, out[i].Last = out[i].Partitions[0], out[i].Partitions[len(out[i].Partitions)-1]
	}
	return out
}
