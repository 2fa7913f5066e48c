package refill

import (
	"fmt"
	"testing"
)

func TestGroupWarnings(t *testing.T) {
	var fs []Finding
	for d := 20; d <= 31; d++ {
		fs = append(fs, Finding{Dataset: "events_raw", Partition: fmt.Sprintf("2026-10-%02d", d), Check: "volume", Warning: true, Passed: true,
			Message: fmt.Sprintf("insufficient history: %d earlier non-empty days, need 4", d%4)})
	}
	fs = append(fs,
		Finding{Dataset: "events_raw", Partition: "2026-10-21", Check: "volume", Message: "0 rows against a median of 1,000"}, // a failure: not grouped
		Finding{Dataset: "events_raw", Partition: "2026-10-19", Check: "volume", Warning: true, Passed: true, Message: "on a calendar day: 0 rows"},
		Finding{Dataset: "events_raw", Partition: "2026-10-18", Check: "not_null", Column: "amount", Warning: true, Passed: true, Message: "insufficient history: x"},
	)
	got := GroupWarnings(fs)
	if len(got) != 3 {
		t.Fatalf("%d groups, want 3: %+v", len(got), got)
	}
	g := got[0]
	if g.What != "insufficient history" || len(g.Partitions) != 12 || g.First != "2026-10-20" || g.Last != "2026-10-31" || g.Check != "volume" || g.Column != "" {
		t.Errorf("first group: %+v", g)
	}
	if got[1].What != "on a calendar day" || len(got[1].Partitions) != 1 || got[2].Column != "amount" {
		t.Errorf("other groups: %+v", got[1:])
	}
}

// TestCalendarWarningsStayApart: failures a calendar day turned into
// warnings say what failed after their first words; none is hidden in a
// group.
func TestCalendarWarningsStayApart(t *testing.T) {
	fs := []Finding{
		{Dataset: "hv", Partition: "2026-12-25T07", Check: "volume", Warning: true, Message: "on the calendar (12-25), so a warning: partition is empty; history has rows"},
		{Dataset: "hv", Partition: "2026-12-25T09", Check: "volume", Warning: true, Message: "on the calendar (12-25), so a warning: 4,120 rows, z 5.1 over 3"},
	}
	if got := GroupWarnings(fs); len(got) != 2 || got[0].Example != fs[0].Message || got[1].Example != fs[1].Message {
		t.Errorf("calendar warnings grouped: %+v", got)
	}
}
