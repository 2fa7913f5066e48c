package lineage

// The external tests (package lineage_test, which may import config: config
// imports lineage) share the -update flag and the golden helper.
var (
	Update = update
	Golden = golden
)
