package dsn

import (
	"errors"
	"strings"
	"testing"
)

// TestNoPasswordSurvives: every form of DSN refill is given comes back
// without its password, and an error carrying one is scrubbed while
// errors.Is still reaches its cause.
func TestNoPasswordSurvives(t *testing.T) {
	for _, c := range []struct{ in, secret string }{
		{"postgres://refill:s3cr%40t@db:5432/wh", "s3cr@t"},
		{"postgres://refill@db/wh?password=hunter2&sslmode=disable", "hunter2"},
		{"host=db user=refill password='p w d' dbname=wh", "p w d"},
		{"postgres://refill:pa:ss@db/wh%", "pa:ss"},
		{"https://airflow:tok3n@af.example/", "tok3n"},
	} {
		if got := Redact(c.in); strings.Contains(got, c.secret) {
			t.Errorf("Redact(%q) = %q: the password survives", c.in, got)
		}
		cause := errors.New("dial " + c.in + " failed for " + c.secret)
		err := RedactError(cause, c.in)
		if strings.Contains(err.Error(), c.secret) || !errors.Is(err, cause) {
			t.Errorf("RedactError: %q (is cause: %v)", err, errors.Is(err, cause))
		}
	}
	if p, ok := SQLitePath("postgres://db/wh", "/cfg"); ok || p != "" {
		t.Errorf("a PostgreSQL DSN is a SQLite path: %q", p)
	}
	if p, ok := SQLitePath("sqlite:wh.db", "/cfg"); !ok || p != "/cfg/wh.db" {
		t.Errorf("SQLitePath = %q, %v", p, ok)
	}
}

// TestRedactKeepsTheRest: only the password changes; a sqlite: DSN, which
// names a file, comes back as it was (even a file named password=x).
func TestRedactKeepsTheRest(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://ann:s3cret@db:5432/wh?sslmode=disable":         "postgres://ann:xxxxx@db:5432/wh?sslmode=disable",
		"postgres://ann@db/wh?password=s3cret&sslmode=require":     "postgres://ann@db/wh?password=xxxxx&sslmode=require",
		"postgres://ann@db/wh":                                     "postgres://ann@db/wh",
		"postgresql://ann@db/sales":                                "postgresql://ann@db/sales",
		"host=db user=ann password=s3cret dbname=wh":               "host=db user=ann password=xxxxx dbname=wh",
		"host=db password='s3 cret' dbname=wh":                     "host=db password=xxxxx dbname=wh",
		"postgres://ann:s3cret@db:notaport/wh%zz":                  "postgres://ann:xxxxx@db:notaport/wh%zz",
		"postgresql://ann:p%40ss@db/wh":                            "postgresql://ann:xxxxx@db/wh",
		"postgres://ann@db/wh?sslpassword=s3cret&application_name": "postgres://ann@db/wh?application_name=&sslpassword=xxxxx",
		"sqlite:warehouse.db":                                      "sqlite:warehouse.db",
		"sqlite:data/password=x.db":                                "sqlite:data/password=x.db",
	} {
		if got := Redact(dsn); got != want {
			t.Errorf("Redact(%q) = %q, want %q", dsn, got, want)
		}
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{"postgres://u:p@h/d", "host=h password=p", "sqlite:x.db", "postgres://u:p@h/d?password=q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Redact(s)
		for _, pw := range Passwords(s) {
			if len(pw) >= 4 && !strings.Contains("xxxxx", pw) && strings.Contains(out, "://") && strings.Contains(out, ":"+pw+"@") {
				t.Errorf("Redact(%q) = %q keeps %q", s, out, pw)
			}
		}
	})
}

// TestSealedWarehouse: a plan seals its warehouse as Redact writes it,
// without the password,
// so a changed password is the same warehouse and a changed host is not.
func TestSealedWarehouse(t *testing.T) {
	for dsn, want := range map[string]string{
		"sqlite:wh.db":                         "sqlite:wh.db",
		"postgres://ann:hunter2@db:5432/sales": "postgres://ann:xxxxx@db:5432/sales",
	} {
		if got := Redact(dsn); got != want {
			t.Errorf("Redact(%q) = %q, want %q", dsn, got, want)
		}
	}
	if Redact("postgres://ann:pw@db/wh") != Redact("postgres://ann:other@db/wh") {
		t.Error("a changed password is another warehouse")
	}
	if Redact("postgres://ann:pw@db/wh") == Redact("postgres://ann:pw@db2/wh") {
		t.Error("another host is the same warehouse")
	}
}

func TestSQLitePath(t *testing.T) {
	for dsn, want := range map[string]string{
		"sqlite:wh.db":            "/cfg/wh.db",
		"sqlite:../data/wh.db":    "/data/wh.db",
		"sqlite:/var/wh.db":       "/var/wh.db",
		"sqlite:///var/wh.db":     "/var/wh.db",
		"sqlite:.refill/state.db": "/cfg/.refill/state.db",
	} {
		if got, ok := SQLitePath(dsn, "/cfg"); got != want || !ok {
			t.Errorf("SQLitePath(%q) = %q, %v; want %q, true", dsn, got, ok, want)
		}
	}
	for _, dsn := range []string{
		"postgres://ann@db:5432/wh",
		"postgresql://ann@db/wh?sslmode=disable",
		"host=db dbname=wh",
		"",
		"SQLITE:wh.db",
	} {
		if got, ok := SQLitePath(dsn, "/cfg"); ok || got != "" {
			t.Errorf("SQLitePath(%q) = %q, %v; want \"\", false: not SQLite", dsn, got, ok)
		}
	}
}
