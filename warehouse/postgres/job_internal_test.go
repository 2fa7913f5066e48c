package postgres

import (
	"strings"
	"testing"

	"github.com/refill-dev/refill/warehouse/sqltext"
)

// FuzzDoBlock checks that whatever a statement holds, the DO block around
// it is one statement: "DO " and one dollar-quoted string, read by the
// lexer refill keeps for PostgreSQL. (The server is the judge; see the
// hostile jobs of the conformance suite.)
func FuzzDoBlock(f *testing.F) {
	for _, s := range []string{"DELETE FROM t; COMMIT", "END $$; COMMIT; DO $$ BEGIN", "$refill_$ $refill_00$", "'", "-- x", "/*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stmt string) {
		block := doBlock(stmt)
		pieces, unterminated := sqltext.Postgres.SplitStatements(block)
		if unterminated >= 0 || len(pieces) != 1 {
			t.Fatalf("doBlock(%q) = %q is not one statement", stmt, block)
		}
		if !strings.HasPrefix(block, "DO $refill_") || !strings.Contains(block, " EXECUTE $refill_") {
			t.Fatalf("doBlock(%q) = %q", stmt, block)
		}
	})
}
