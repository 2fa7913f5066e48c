package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var _ refill.Profiler = (*Warehouse)(nil)

// Profile measures partitions [from, to] of t in one statement and one scan.
//
// SQLite has no hash aggregation: a GROUP BY over an expression sorts every
// row with all the columns the aggregates read. On a million rows that
// scanned in 270 ms, the plain SQL form (GROUP BY key, count(*) - count(c)
// for ten columns, julianday() comparisons for three time checks) took
// 2.4 s: the sort cost more than the scan, and julianday() more again.
//
// So the statement is a plain scan of the range's raw bounds feeding one Go
// aggregate, refill_profile, that groups by partition key in a map, counts
// the null flags (c IS NULL) computed in SQL, and reads timestamps with a
// port of SQLite's own date parser (julian.go), so that every format
// SQLite's date functions accept compares as julianday() would compare it.
// Values that julianday() reads as NULL count as neither inversions nor
// future times. A range's rows still cost two to three times a count(*)
// that reads them (BenchmarkSource), because each checked column is read
// and handed to Go.
func (w *Warehouse) Profile(ctx context.Context, t refill.TableRef, spec refill.ProfileSpec, from, to string) (map[string]refill.Profile, error) {
	return profile(ctx, w.db, t, spec, from, to)
}

// Profile is Warehouse.Profile inside the transaction.
func (t *tx) Profile(ctx context.Context, ref refill.TableRef, spec refill.ProfileSpec, from, to string) (map[string]refill.Profile, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	return profile(ctx, t.conn, ref, spec, from, to)
}

func profile(ctx context.Context, db querier, t refill.TableRef, spec refill.ProfileSpec, from, to string) (map[string]refill.Profile, error) {
	cols, err := columns(ctx, db, t.Table)
	if err != nil {
		return nil, err // names the table already
	}
	key, err := partitionKey(t, cols)
	if err != nil {
		return nil, err
	}
	lo, hi, err := sqltext.DayBounds(t.Grain, from, to)
	if err != nil {
		return nil, fmt.Errorf("profile of %s: %w", t.Table, err)
	}
	plan, err := planProfile(t.Table, cols, spec)
	if err != nil {
		return nil, err
	}
	plan.agg.from, plan.agg.to = from, to
	plan.agg.parts = map[string]*partCounts{}
	id := profiles.add(&plan.agg)
	defer profiles.remove(id)
	pc, err := partitionColumn(t, cols)
	if err != nil {
		return nil, err
	}
	col := sqltext.QuoteIdent(pc.Name)
	q := fmt.Sprintf("SELECT refill_profile(?3, %s%s) FROM %s WHERE %s >= ?1 AND %s < ?2",
		key, plan.args, sqltext.SQLite.QuoteName(t.Table), col, col)
	var rows int64
	if err := db.QueryRowContext(ctx, q, append([]any{lo, hi, id}, plan.binds...)...).Scan(&rows); err != nil {
		return nil, fmt.Errorf("profile of %s: %w", t.Table, err)
	}
	out := make(map[string]refill.Profile, len(plan.agg.parts))
	for p, c := range plan.agg.parts {
		out[p] = plan.profile(c)
	}
	g := grouped{db: db, table: t.Table, key: key, where: fmt.Sprintf("%s >= ?1 AND %s < ?2", col, col), lo: lo, hi: hi, from: from, to: to}
	if err := g.values(ctx, cols, spec.Drift, out); err != nil {
		return nil, err
	}
	if err := g.duplicates(ctx, cols, spec.Unique, out); err != nil {
		return nil, err
	}
	return out, nil
}

// profiles hands each Profile's spec to its aggregate, and the aggregate's
// counts back, by a number passed as the aggregate's first argument. A
// number under 256 is the cheapest argument there is: SQLite's driver
// boxes every argument of every row into an interface, and Go boxes small
// integers without allocating, where a spec passed as text would cost an
// allocation per row.
var profiles = &profileRegistry{specs: map[int64]*profileSpec{}}

type profileRegistry struct {
	mu    sync.Mutex
	next  int64
	specs map[int64]*profileSpec
}

// add registers spec under a number no running profile uses, preferring
// small ones.
func (r *profileRegistry) add(spec *profileSpec) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		r.next++
		if r.next > 255 && len(r.specs) < 255 {
			r.next = 1
		}
		if r.specs[r.next] == nil {
			r.specs[r.next] = spec
			return r.next
		}
	}
}

func (r *profileRegistry) get(id int64) *profileSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.specs[id]
}

func (r *profileRegistry) remove(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.specs, id)
}

// profilePlan is a ProfileSpec checked against a table: the arguments the
// aggregate gets after the partition key, and how to read its counts back.
type profilePlan struct {
	spec refill.ProfileSpec
	args string // ", nulls..., times..., accepted flags..., numbers..."
	// binds are the accepted values, bound as ?4 onwards.
	binds   []any
	numeric []string // the drift columns read as numbers, as spec names them
	agg     profileSpec
}

// profileSpec tells the aggregate how to read its arguments, and collects
// its counts. The aggregate finds it in the registry.
type profileSpec struct {
	from, to string
	// now is the clock as an iJD.
	now int64
	// nulls is how many null flags (c IS NULL) follow the key.
	nulls int
	// times is how many timestamp arguments follow the null flags, each
	// column once however many checks use it.
	times int
	// pairs index the times as (earlier, later); future indexes them.
	pairs  [][2]int
	future []int
	// accepted is how many accepted-values flags (c IN (...)) follow the
	// times, numbers how many numeric drift columns follow those.
	accepted, numbers int
	// parts are the counts by partition key, which the aggregate fills.
	parts map[string]*partCounts
}

// planProfile checks spec's columns against cols and builds the arguments.
func planProfile(table string, cols []refill.Column, spec refill.ProfileSpec) (*profilePlan, error) {
	p := &profilePlan{spec: spec}
	p.agg.now = spec.Now.UnixMilli() + unixEpochJulianMS
	var args strings.Builder
	for _, name := range spec.NotNull {
		c, err := checkColumn(table, cols, name, "not_null", false)
		if err != nil {
			return nil, err
		}
		// One argument per column: cheaper in SQLite's VM than packing
		// the flags into bits of one integer.
		fmt.Fprintf(&args, ", %s IS NULL", sqltext.QuoteIdent(c.Name))
	}
	p.agg.nulls = len(spec.NotNull)
	times := map[string]int{} // column (as in cols) -> index among the time arguments
	timeArg := func(name, check string) (int, error) {
		c, err := checkColumn(table, cols, name, check, true)
		if err != nil {
			return 0, err
		}
		if i, ok := times[c.Name]; ok {
			return i, nil
		}
		times[c.Name] = len(times)
		fmt.Fprintf(&args, ", %s", sqltext.QuoteIdent(c.Name))
		return len(times) - 1, nil
	}
	for _, to := range spec.TimeOrder {
		e, err := timeArg(to.Earlier, "time_order")
		if err != nil {
			return nil, err
		}
		l, err := timeArg(to.Later, "time_order")
		if err != nil {
			return nil, err
		}
		p.agg.pairs = append(p.agg.pairs, [2]int{e, l})
	}
	for _, name := range spec.NoFuture {
		i, err := timeArg(name, "no_future")
		if err != nil {
			return nil, err
		}
		p.agg.future = append(p.agg.future, i)
	}
	p.agg.times = len(times)
	for _, a := range spec.Accepted {
		c, err := checkColumn(table, cols, a.Column, "accepted_values", false)
		if err != nil {
			return nil, err
		}
		// NULL IN (...) is NULL: neither accepted nor outside. SQLite
		// applies the column's affinity to the list, so '1' matches 1 in
		// an INTEGER column.
		marks := make([]string, len(a.Values))
		for i, v := range a.Values {
			p.binds = append(p.binds, v)
			marks[i] = fmt.Sprintf("?%d", 3+len(p.binds))
		}
		fmt.Fprintf(&args, ", %s IN (%s)", sqltext.QuoteIdent(c.Name), strings.Join(marks, ", "))
	}
	p.agg.accepted = len(spec.Accepted)
	for _, name := range spec.Drift {
		c, err := checkColumn(table, cols, name, "drift", false)
		if err != nil {
			return nil, err
		}
		if numericType(c.Type) {
			p.numeric = append(p.numeric, name)
			fmt.Fprintf(&args, ", %s", sqltext.QuoteIdent(c.Name))
		}
	}
	p.agg.numbers = len(p.numeric)
	p.args = args.String()
	return p, nil
}

// numericType reports whether a declared SQLite type has INTEGER, REAL or
// NUMERIC affinity, so that drift reads its mean and zero share.
func numericType(typ string) bool {
	for _, s := range []string{"int", "real", "floa", "doub", "num", "dec"} {
		if strings.Contains(typ, s) {
			return true
		}
	}
	return false
}

// profile turns one partition's counts from the aggregate, laid out as
// [rows, nulls..., inversions..., future..., (non-null, outside)...,
// (non-null, zeros)...], into a Profile.
func (p *profilePlan) profile(pc *partCounts) refill.Profile {
	c := pc.counts
	get := func(i int) int64 {
		if i < len(c) {
			return c[i]
		}
		return 0
	}
	pr := refill.Profile{
		Rows:       get(0),
		Nulls:      make(map[string]int64, len(p.spec.NotNull)),
		Inversions: make([]int64, len(p.spec.TimeOrder)),
		Future:     make(map[string]int64, len(p.spec.NoFuture)),
	}
	i := 1
	for _, name := range p.spec.NotNull {
		pr.Nulls[name] = get(i)
		i++
	}
	for j := range p.spec.TimeOrder {
		pr.Inversions[j] = get(i)
		i++
	}
	for _, name := range p.spec.NoFuture {
		pr.Future[name] = get(i)
		i++
	}
	if len(p.spec.Accepted) > 0 {
		pr.Accepted = make(map[string]refill.AcceptedProfile, len(p.spec.Accepted))
		for _, a := range p.spec.Accepted {
			pr.Accepted[a.Column] = refill.AcceptedProfile{NonNull: get(i), Outside: get(i + 1)}
			i += 2
		}
	}
	if len(p.spec.Drift) > 0 {
		pr.Numeric = make(map[string]refill.NumericProfile, len(p.numeric))
		for j, name := range p.numeric {
			n := refill.NumericProfile{NonNull: get(i), Zeros: get(i + 1)}
			if n.NonNull > 0 {
				n.Mean = pc.sum(j) / float64(n.NonNull)
			}
			pr.Numeric[name] = n
			i += 2
		}
	}
	return pr
}

// checkColumn finds a column a check names, and for time checks makes sure
// it can hold timestamps: SQLite stores them as text, so a column declared
// text, char, clob, date, datetime or timestamp, or with no type at all.
// A numeric column would hold numbers that julianday() reads as Julian day
// numbers, which is never what a timestamp column means.
func checkColumn(table string, cols []refill.Column, name, check string, timestamp bool) (refill.Column, error) {
	c, ok := sqltext.SQLite.Column(cols, name)
	if !ok {
		return c, sqltext.SQLite.NoColumn(table, name, "named by its "+check+" check", cols)
	}
	if timestamp && !timeType(c.Type) {
		return c, refill.BadInputf("column %s of table %s is %s; time checks need a timestamp column (text, date, datetime or timestamp)", c.Name, table, c.Type)
	}
	return c, nil
}

// timeType reports whether a declared SQLite type can hold timestamps.
func timeType(typ string) bool {
	if typ == "" {
		return true
	}
	if strings.Contains(typ, "int") {
		return false // INTEGER affinity, whatever else the name says
	}
	for _, s := range []string{"char", "clob", "text", "date", "time"} {
		if strings.Contains(typ, s) {
			return true
		}
	}
	return false
}

func init() {
	msqlite.MustRegisterFunction("refill_profile", &msqlite.FunctionImpl{
		NArgs:         -1,
		Deterministic: true,
		// Step copies what it keeps (partition keys), so SQLite's own
		// buffers can be lent to it instead of copied for every row.
		VolatileArgs: true,
		MakeAggregate: func(msqlite.FunctionContext) (msqlite.AggregateFunction, error) {
			return &profileAgg{wallNow: time.Now().UnixMilli() + unixEpochJulianMS}, nil
		},
	})
}

// profileAgg is one evaluation of refill_profile(id, key, null flags...,
// times...): per partition key in the spec's range, it counts rows, each
// null flag, each inverted pair of times and each future time into the
// spec registered as id. Its result is the number of rows counted.
type profileAgg struct {
	spec    *profileSpec
	wallNow int64 // what 'now' in a timestamp column means
	rows    int64
	last    *partCounts // the partition of the previous row: rows come clustered
	times   []int64
	valid   []bool
}

func (a *profileAgg) Step(_ *msqlite.FunctionContext, args []driver.Value) (err error) {
	defer func() {
		// A panic here would take the whole process down with SQLite's
		// stack: make it the statement's error instead.
		if r := recover(); r != nil {
			err = fmt.Errorf("refill_profile: %v", r)
		}
	}()
	if a.spec == nil {
		if err := a.init(args); err != nil {
			return err
		}
	}
	spec := a.spec
	key, ok := args[1].(string)
	if !ok || key < spec.from || key > spec.to {
		return nil // NULL, or not a partition in the range
	}
	if a.last == nil || key != a.last.key {
		// key is SQLite's buffer, reused for the next row: keep a copy.
		p := spec.parts[key]
		if p == nil {
			p = &partCounts{key: strings.Clone(key), counts: make([]int64, 1+spec.nulls+len(spec.pairs)+len(spec.future)+2*spec.accepted+2*spec.numbers),
				ints: make([]int64, spec.numbers), floats: make([]float64, spec.numbers)}
			spec.parts[p.key] = p
		}
		a.last = p
	}
	a.rows++
	c := a.last.counts
	c[0]++
	for j, null := range args[2 : 2+spec.nulls] {
		if null == int64(1) {
			c[1+j]++
		}
	}
	if spec.times > 0 {
		a.stepTimes(args, c)
	}
	i := 1 + spec.nulls + len(spec.pairs) + len(spec.future)
	base := 2 + spec.nulls + spec.times
	for _, in := range args[base : base+spec.accepted] {
		if in != nil {
			c[i]++
			if in == int64(0) {
				c[i+1]++
			}
		}
		i += 2
	}
	base += spec.accepted
	for j, v := range args[base : base+spec.numbers] {
		var x float64
		switch v := v.(type) {
		case nil:
			i += 2
			continue
		case int64:
			a.last.ints[j] += v // exact while it fits, as SQLite's sum() is
			x = float64(v)
		case float64:
			a.last.floats[j] += v
			x = v
		default:
			i += 2
			continue // text in a numeric column is not a number
		}
		c[i]++
		if x == 0 {
			c[i+1]++
		}
		i += 2
	}
	return nil
}

// stepTimes counts one row's inverted pairs and future times.
func (a *profileAgg) stepTimes(args []driver.Value, c []int64) {
	spec := a.spec
	base := 2 + spec.nulls
	for i := range a.times {
		a.times[i], a.valid[i] = julianMS(args[base+i], a.wallNow)
	}
	i := 1 + spec.nulls
	for _, pair := range spec.pairs {
		if a.valid[pair[0]] && a.valid[pair[1]] && a.times[pair[0]] > a.times[pair[1]] {
			c[i]++
		}
		i++
	}
	for _, f := range spec.future {
		if a.valid[f] && a.times[f] > spec.now {
			c[i]++
		}
		i++
	}
}

// init finds the spec the first row's first argument names and checks the
// argument count against it.
func (a *profileAgg) init(args []driver.Value) error {
	id, _ := args[0].(int64)
	spec := profiles.get(id)
	if spec == nil {
		return fmt.Errorf("refill_profile: no profile %v is running", args[0])
	}
	if want := 2 + spec.nulls + spec.times + spec.accepted + spec.numbers; len(args) != want {
		return fmt.Errorf("refill_profile: %d arguments for a spec that needs %d", len(args), want)
	}
	a.spec = spec
	a.times = make([]int64, spec.times)
	a.valid = make([]bool, spec.times)
	return nil
}

// partCounts is one partition's counts, laid out as [rows, nulls...,
// inversions..., future...].
type partCounts struct {
	key    string
	counts []int64
	// ints and floats are each numeric drift column's sum, kept apart so
	// that a column of integers sums exactly.
	ints   []int64
	floats []float64
}

func (p *partCounts) sum(j int) float64 { return float64(p.ints[j]) + p.floats[j] }

func (a *profileAgg) WindowInverse(*msqlite.FunctionContext, []driver.Value) error {
	return fmt.Errorf("refill_profile is not a window function")
}

func (a *profileAgg) WindowValue(*msqlite.FunctionContext) (driver.Value, error) {
	return a.rows, nil
}

func (a *profileAgg) Final(*msqlite.FunctionContext) {}
