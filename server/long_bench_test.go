package server_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
)

var longMix = flag.String("long.mix", "all", "what BenchmarkServeLongReasons reads: lists, plans (the long plans' pages) or all")

// storeLongReasons stores n plans of sessions whose reasons are size
// characters long, as someone who can write the state store would — or as
// refill did before it bounded texts: made by the planner, then given the
// reason and rehashed, so that each loads as a plan. It returns their IDs.
func storeLongReasons(t testing.TB, p *project.Project, day func(int) string, n, size int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range n {
		plan, err := p.Control.Planner.Build(ctx, planner.Request{Targets: []string{"sessions"}, From: day(40 + 2*i), To: day(40 + 2*i),
			Reason: "short", Actor: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		plan.Request.Reason = strings.Repeat("x", size)
		plan.Hash = plan.ComputeHash()
		if _, err := p.Store.RecordPlan(ctx, refill.PlanRecord{Plan: plan}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, plan.ID)
	}
	return ids
}

// BenchmarkServeLongReasons is the read load of issue 19: eleven plans
// with 900 KB reasons stored straight into the SQLite state store, and
// -load.clients clients for -load.duration reading the plans list and
// plan pages of the API and the web UI, a quarter each (the plan pages
// are those of the long plans); -long.mix lists or plans reads only the
// lists, or only the plan pages, of both. It reports requests per second, the
// bytes a list answer carries, and the process's peak resident memory
// (VmHWM: what /usr/bin/time -v reports as maximum resident set size),
// which is the server's, as the clients only count what they read. Run
// it once, on its own:
//
//	go test ./server -run '^$' -bench ServeLongReasons -benchtime 1x -load.duration 30s
func BenchmarkServeLongReasons(b *testing.B) {
	e := apiServeB(b, "")
	long := storeLongReasons(b, e.p, e.sc.Day, 11, 900<<10)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *loadClients}}
	get := func(path string) (int64, error) {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.tokens["alice"])
		req.AddCookie(&http.Cookie{Name: "refill_session", Value: e.tokens["alice"]})
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		return n, err
	}
	listBytes, err := get("/api/v1/plans")
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	requests, errs := 0, 0
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		stop := time.Now().Add(*loadDuration)
		var wg sync.WaitGroup
		for c := 0; c < *loadClients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(c), uint64(n)))
				done, bad := 0, 0
				for time.Now().Before(stop) {
					id := long[rng.IntN(len(long))]
					paths := []string{"/api/v1/plans", "/", "/api/v1/plans/" + id, "/plans/" + id}
					switch *longMix {
					case "lists":
						paths = paths[:2]
					case "plans":
						paths = paths[2:]
					}
					path := paths[rng.IntN(len(paths))]
					if _, err := get(path); err != nil {
						bad++
					}
					done++
				}
				mu.Lock()
				requests, errs = requests+done, errs+bad
				mu.Unlock()
			}(c)
		}
		wg.Wait()
	}
	b.StopTimer()
	hwm := peakRSS(b)
	secs := loadDuration.Seconds() * float64(b.N)
	b.ReportMetric(float64(requests)/secs, "req/s")
	b.ReportMetric(float64(errs), "errors")
	b.ReportMetric(float64(listBytes), "list-bytes")
	b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MB")
	b.Logf("%d clients for %s: %d requests (%.0f/s), %d errors; a list answer is %d bytes; peak RSS %.0f MB",
		*loadClients, *loadDuration, requests, float64(requests)/secs, errs, listBytes, float64(hwm)/(1<<20))
}

// peakRSS is the process's peak resident memory, from /proc/self/status.
func peakRSS(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status:", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if _, err := fmt.Sscanf(sc.Text(), "VmHWM: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	b.Skip("no VmHWM in /proc/self/status")
	return 0
}
