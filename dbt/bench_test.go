package dbt

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/refill-dev/refill/internal/fixtures"
)

// BenchmarkImport imports the larger real manifest (hubspot, 2.6 MB, 283
// nodes, 61 sources, 860 KB of macros skipped). Besides time and
// allocations per import it reports peak-heap/op: the most heap in use
// while one import ran, sampled by a goroutine (runtime.ReadMemStats,
// HeapInuse) against a baseline taken after a GC, so it measures what one
// import holds at once rather than what it allocates over its life.
//
//	go test ./dbt/ -run '^$' -bench Import -benchmem
func BenchmarkImport(b *testing.B) {
	path := filepath.Join(fixtures.Dir(b, "dbt"), hubspot)
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Load(path, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse+yaml", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			imp, err := Load(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := imp.YAML(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("peak", func(b *testing.B) {
		var peak uint64
		for b.Loop() {
			b.StopTimer()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base := ms.HeapInuse
			done := make(chan struct{})
			sampled := make(chan uint64)
			go func() {
				var top uint64
				var s runtime.MemStats
				for {
					runtime.ReadMemStats(&s)
					top = max(top, s.HeapInuse)
					select {
					case <-done:
						sampled <- top
						return
					default:
					}
				}
			}()
			b.StartTimer()
			imp, err := Load(path, Options{})
			b.StopTimer()
			close(done)
			top := <-sampled
			if err != nil {
				b.Fatal(err)
			}
			runtime.KeepAlive(imp)
			if top > base {
				peak = max(peak, top-base)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
	})
}
