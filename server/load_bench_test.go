package server_test

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill/internal/pgtest"
)

var (
	loadDuration = flag.Duration("load.duration", 5*time.Second, "how long BenchmarkServeLoad runs (BENCHMARKS.md uses 60s)")
	loadClients  = flag.Int("load.clients", 50, "concurrent clients of BenchmarkServeLoad")
)

// BenchmarkServeLoad is a bounded load run on loopback: -load.clients
// clients for -load.duration, each request drawn from a mix of plan reads
// (50%), lists (20%), history (20%) and plan creation (10%). It reports
// requests per second, p50 and p99 per kind, and errors. Run it once:
//
//	go test ./server -run '^$' -bench ServeLoad -benchtime 1x -load.duration 60s
func BenchmarkServeLoad(b *testing.B) {
	for _, store := range []string{"sqlite", "postgres"} {
		b.Run(store, func(b *testing.B) {
			dsn := ""
			if store == "postgres" {
				dsn = pgtest.Schema(b)
			}
			e := apiServeB(b, dsn)
			// Some plans to read.
			var ids []string
			for i := 0; i < 20; i++ {
				st, res := e.callB(b, "alice", "POST", "/api/v1/plans", planBody(e, i))
				if st != http.StatusCreated {
					b.Fatalf("seed plan: %d %v", st, res)
				}
				ids = append(ids, res["id"].(string))
			}
			type sample struct {
				kind string
				took time.Duration
				err  bool
			}
			var mu sync.Mutex
			var samples []sample
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *loadClients}}
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				stop := time.Now().Add(*loadDuration)
				var wg sync.WaitGroup
				for c := 0; c < *loadClients; c++ {
					wg.Add(1)
					go func(c int) {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(c), uint64(n)))
						var local []sample
						for i := 0; time.Now().Before(stop); i++ {
							var kind, method, path, body string
							switch r := rng.IntN(10); {
							case r < 5:
								kind, method, path = "read", "GET", "/api/v1/plans/"+ids[rng.IntN(len(ids))]
							case r < 7:
								kind, method, path = "list", "GET", "/api/v1/plans?limit=50"
							case r < 9:
								kind, method, path = "history", "GET", "/api/v1/history?dataset=sessions&partition="+e.sc.Day(10+rng.IntN(20))
							default:
								kind, method, path, body = "create", "POST", "/api/v1/plans", planBody(e, rng.IntN(40))
							}
							req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
							req.Header.Set("Authorization", "Bearer "+e.tokens["alice"])
							req.Header.Set("Content-Type", "application/json")
							start := time.Now()
							resp, err := client.Do(req)
							bad := err != nil
							if err == nil {
								_, _ = io.Copy(io.Discard, resp.Body)
								resp.Body.Close()
								// A created plan may be blocked (409) by the
								// demo's broken days: that is an answer, not
								// an error.
								bad = resp.StatusCode >= 500 || (resp.StatusCode >= 400 && resp.StatusCode != http.StatusConflict)
							}
							local = append(local, sample{kind, time.Since(start), bad})
						}
						mu.Lock()
						samples = append(samples, local...)
						mu.Unlock()
					}(c)
				}
				wg.Wait()
			}
			b.StopTimer()
			byKind := map[string][]time.Duration{}
			errs := 0
			for _, s := range samples {
				byKind[s.kind] = append(byKind[s.kind], s.took)
				byKind["all"] = append(byKind["all"], s.took)
				if s.err {
					errs++
				}
			}
			secs := loadDuration.Seconds() * float64(b.N)
			b.ReportMetric(float64(len(samples))/secs, "req/s")
			b.ReportMetric(float64(errs), "errors")
			for _, k := range []string{"read", "list", "history", "create", "all"} {
				d := byKind[k]
				slices.Sort(d)
				if len(d) == 0 {
					continue
				}
				p50, p99 := d[len(d)/2], d[min(len(d)-1, len(d)*99/100)]
				b.ReportMetric(float64(p50.Microseconds())/1000, k+"-p50-ms")
				b.ReportMetric(float64(p99.Microseconds())/1000, k+"-p99-ms")
				b.Logf("%-8s %6d requests  p50 %8s  p99 %8s", k, len(d), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
			}
			b.Logf("%d clients for %s: %d requests (%.0f/s), %d errors", *loadClients, *loadDuration, len(samples), float64(len(samples))/secs, errs)
		})
	}
}

// planBody asks for three days of sessions ending i days before the
// demo's last.
func planBody(e *apiEnv, i int) string {
	return fmt.Sprintf(`{"targets":["sessions"],"from":%q,"to":%q,"reason":"load %d"}`, e.sc.Day(12+i), e.sc.Day(10+i), i)
}
