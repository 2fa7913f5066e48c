package storetest

import (
	"fmt"
	"os"
	osexec "os/exec"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill/store"
)

// exerciseSlots covers run.max_active across processes: at most limit live
// slots per dataset, one job per partition, and slots of a dead process or
// past their time free for others.
func exerciseSlots(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("SlotsBoundADataset", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		host, _ := os.Hostname()
		me := fmt.Sprintf("%s:%d", host, os.Getpid())
		now, until := at(0), at(0).Add(30*time.Second)
		slot := func(key, holder string) store.Slot {
			return store.Slot{Dataset: "orders", Key: key, Holder: holder, Process: me}
		}
		take := func(sl store.Slot, when time.Time, want bool) {
			t.Helper()
			got, err := s.TakeSlot(ctx, sl, 2, when, when.Add(30*time.Second))
			if err != nil || got != want {
				t.Fatalf("TakeSlot(%s by %s) = %v, %v; want %v", sl.Key, sl.Holder, got, err, want)
			}
		}
		take(slot("p/11-01", "job1"), now, true)
		take(slot("p/11-01", "job2"), now, false) // one job per partition
		take(slot("p/11-02", "job3"), now, true)
		take(slot("p/11-03", "job4"), now, false) // max 2 for the dataset
		take(slot("p/11-01", "job1"), now, true)  // its own: renewed
		other := store.Slot{Dataset: "sessions", Key: "p/11-03", Holder: "job5", Process: me}
		take(other, now, true) // another dataset counts apart
		if process, live, err := s.SlotOf(ctx, "orders", "p/11-01", now); err != nil || process != me || !live {
			t.Fatalf("SlotOf(11-01) = %q, %v, %v; want held and live", process, live, err)
		}
		if process, live, err := s.SlotOf(ctx, "orders", "p/11-09", now); err != nil || process != "" || live {
			t.Fatalf("SlotOf(11-09), never taken = %q, %v, %v; want neither", process, live, err)
		}

		if err := s.ReleaseSlot(ctx, slot("p/11-01", "job2")); err != nil { // not its own: nothing
			t.Fatal(err)
		}
		take(slot("p/11-03", "job4"), now, false)
		if err := s.ReleaseSlot(ctx, slot("p/11-01", "job1")); err != nil {
			t.Fatal(err)
		}
		take(slot("p/11-03", "job4"), now, true)
		if ok, err := s.RenewSlot(ctx, slot("p/11-01", "job1"), until); err != nil || ok {
			t.Errorf("renewing a released slot = %v, %v; want false", ok, err)
		}

		// Past their time, slots count for nothing: others take the
		// dataset's slots, and a lapsed slot's partition too; its holder
		// learns it when it renews.
		later := until.Add(time.Second)
		take(slot("p/11-05", "job6"), later, true)
		take(slot("p/11-06", "job7"), later, true)
		if process, live, err := s.SlotOf(ctx, "orders", "p/11-02", later); err != nil || process == "" || live {
			t.Errorf("SlotOf a lapsed slot = %q, %v, %v; want held, not live", process, live, err)
		}
		if err := s.ReleaseSlot(ctx, slot("p/11-05", "job6")); err != nil {
			t.Fatal(err)
		}
		take(slot("p/11-03", "job8"), later, true)
		if ok, err := s.RenewSlot(ctx, slot("p/11-03", "job4"), later.Add(time.Minute)); err != nil || ok {
			t.Errorf("renewing a slot another took = %v, %v; want false", ok, err)
		}
		if ok, err := s.RenewSlot(ctx, slot("p/11-02", "job3"), later.Add(time.Minute)); err != nil || !ok {
			t.Errorf("renewing a lapsed slot nobody took = %v, %v; want true", ok, err)
		}
	})

	t.Run("SlotsGoToTheOldestWaiter", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		host, _ := os.Hostname()
		me := fmt.Sprintf("%s:%d", host, os.Getpid())
		// Jobs a… run in this process, w… in a worker on another host.
		slot := func(key, holder string) store.Slot {
			process := me
			if holder[0] == 'w' {
				process = "worker-host:42"
			}
			return store.Slot{Dataset: "orders", Key: key, Holder: holder, Process: process}
		}
		take := func(sl store.Slot, when time.Time, want bool) {
			t.Helper()
			got, err := s.TakeSlot(ctx, sl, 1, when, when.Add(30*time.Second))
			if err != nil || got != want {
				t.Fatalf("TakeSlot(%s by %s) at %s = %v, %v; want %v", sl.Key, sl.Holder, when.Format(time.TimeOnly), got, err, want)
			}
		}
		now := at(0)
		take(slot("p/11-01", "a1"), now, true)
		take(slot("p/11-02", "w1"), now.Add(time.Second), false) // another process's job waits first
		if err := s.ReleaseSlot(ctx, slot("p/11-01", "a1")); err != nil {
			t.Fatal(err)
		}
		// The process that gave the slot back asks at once for its next
		// partition: the one waiting longer gets it.
		take(slot("p/11-03", "a2"), now.Add(2*time.Second), false)
		take(slot("p/11-02", "w2"), now.Add(3*time.Second), true) // asked again (snoozed, fetched again): its place kept
		if err := s.ReleaseSlot(ctx, slot("p/11-02", "w2")); err != nil {
			t.Fatal(err)
		}
		take(slot("p/11-04", "w3"), now.Add(4*time.Second), false) // behind 11-03
		take(slot("p/11-03", "a3"), now.Add(5*time.Second), true)
		if err := s.ReleaseSlot(ctx, slot("p/11-03", "a3")); err != nil {
			t.Fatal(err)
		}
		// A waiter that gave up for good, or stopped asking, holds nobody
		// back.
		if err := s.LeaveSlotQueue(ctx, "orders", "p/11-04"); err != nil {
			t.Fatal(err)
		}
		take(slot("p/11-05", "a4"), now.Add(6*time.Second), true)
		if err := s.ReleaseSlot(ctx, slot("p/11-05", "a4")); err != nil {
			t.Fatal(err)
		}
		take(slot("p/11-06", "w4"), now.Add(7*time.Second), true)
		take(slot("p/11-07", "a5"), now.Add(8*time.Second), false) // waits from 8 s
		if err := s.ReleaseSlot(ctx, slot("p/11-06", "w4")); err != nil {
			t.Fatal(err)
		}
		take(slot("p/11-08", "w5"), now.Add(8*time.Second+store.WaiterKept+time.Second), true) // 11-07 stopped asking
		if err := s.ReleaseSlot(ctx, slot("p/11-08", "w5")); err != nil {
			t.Fatal(err)
		}

		// A waiter of the asking job's own process is not ahead of it (the
		// process's jobs take turns before they ask): the sibling asks in
		// its place, and from its time, ahead of a later worker.
		later := now.Add(time.Minute)
		take(slot("p/11-09", "w6"), later, true)
		take(slot("p/11-10", "a6"), later.Add(time.Second), false)   // waits, then is snoozed
		take(slot("p/11-11", "w7"), later.Add(2*time.Second), false) // a later worker job waits too
		if err := s.ReleaseSlot(ctx, slot("p/11-09", "w6")); err != nil {
			t.Fatal(err)
		}
		take(slot("p/11-12", "a7"), later.Add(3*time.Second), true) // a6's sibling, in a6's place
	})
	t.Run("SlotsOfADeadProcessAreFree", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		host, _ := os.Hostname()
		dead := fmt.Sprintf("%s:%d", host, deadPID(t))
		now := at(0)
		if ok, err := s.TakeSlot(ctx, store.Slot{Dataset: "orders", Key: "k1", Holder: "gone", Process: dead}, 1, now, now.Add(time.Hour)); err != nil || !ok {
			t.Fatalf("TakeSlot = %v, %v", ok, err)
		}
		if process, live, err := s.SlotOf(ctx, "orders", "k1", now); err != nil || process == "" || live {
			t.Errorf("a slot of a process that no longer exists: held %v, live %v, %v; want held, not live", process, live, err)
		}
		// Another partition's job takes the dataset's one slot; the dead
		// job's slot still tells that its job was lost.
		if ok, err := s.TakeSlot(ctx, store.Slot{Dataset: "orders", Key: "k2", Holder: "other", Process: "elsewhere:1"}, 1, now, now.Add(time.Minute)); err != nil || !ok {
			t.Fatalf("TakeSlot(k2) beside a dead slot = %v, %v; want taken", ok, err)
		}
		if process, live, err := s.SlotOf(ctx, "orders", "k1", now); err != nil || process == "" || live {
			t.Errorf("the dead job's slot after another was taken: held %v, live %v, %v; want held, not live", process, live, err)
		}
		if err := s.ReleaseSlot(ctx, store.Slot{Dataset: "orders", Key: "k2", Holder: "other"}); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.TakeSlot(ctx, store.Slot{Dataset: "orders", Key: "k1", Holder: "next", Process: "elsewhere:1"}, 1, now, now.Add(time.Minute)); err != nil || !ok {
			t.Errorf("taking the partition of a dead process's job = %v, %v; want taken", ok, err)
		}
	})

	t.Run("SlotsRaced", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		now := at(0)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := s.TakeSlot(ctx, store.Slot{Dataset: "orders", Key: fmt.Sprintf("k%d", i), Holder: fmt.Sprintf("job%d", i), Process: "elsewhere:1"}, 3, now, now.Add(time.Minute))
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if won != 3 {
			t.Errorf("12 jobs raced for 3 slots: %d took one", won)
		}
	})
}

// deadPID returns the id of a process that has exited (and been waited
// for), so no process of this host has it for now.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := osexec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("no process to watch die: %v", err)
	}
	return cmd.Process.Pid
}
