package lineage

import (
	"runtime"
	"sync"
	"weak"

	"github.com/refill-dev/refill"
)

// shared holds the graph of each loaded config, built once: a config is
// not changed once loaded (a reload loads a new one), and a Graph is only
// read after New. An entry goes when its config is collected.
var shared = struct {
	sync.Mutex
	m map[weak.Pointer[refill.Config]]*built
}{m: map[weak.Pointer[refill.Config]]*built{}}

type built struct {
	once sync.Once
	g    *Graph
	err  error
}

// Of returns cfg's lineage graph, built the first time it is asked for
// and shared by every caller after (the planner, control's staleness
// check, the server's pictures and API): New over cfg.Datasets.
func Of(cfg *refill.Config) (*Graph, error) {
	k := weak.Make(cfg)
	shared.Lock()
	b, ok := shared.m[k]
	if !ok {
		b = &built{}
		shared.m[k] = b
		runtime.AddCleanup(cfg, func(k weak.Pointer[refill.Config]) {
			shared.Lock()
			delete(shared.m, k)
			shared.Unlock()
		}, k)
	}
	shared.Unlock()
	b.once.Do(func() { b.g, b.err = New(cfg.Datasets) })
	return b.g, b.err
}
