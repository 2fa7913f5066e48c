package run

import (
	"strings"
	"testing"

	"github.com/refill-dev/refill/queue"
)

// TestInterleave: one level's jobs are queued a partition of each dataset
// at a time, each dataset's partitions in their order, none lost.
func TestInterleave(t *testing.T) {
	t.Parallel()
	var todo []queue.PartitionArgs
	for _, j := range []string{"a1", "a2", "a3", "a4", "b1", "c1", "c2"} {
		todo = append(todo, queue.PartitionArgs{Dataset: j[:1], Partition: j[1:]})
	}
	var got []string
	for _, a := range interleave(todo) {
		got = append(got, a.Dataset+a.Partition)
	}
	if s := strings.Join(got, " "); s != "a1 b1 c1 a2 c2 a3 a4" {
		t.Errorf("interleave = %s", s)
	}
	if len(interleave(nil)) != 0 {
		t.Error("interleave(nil) is not empty")
	}
}
