package airflow

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeRun feeds arbitrary answers to the DAG run decoder. A run it
// accepts must have the ID and state that polling relies on; anything else
// must be an error, never a panic.
func FuzzDecodeRun(f *testing.F) {
	for _, api := range apis {
		fa := &fakeAirflow{api: api, user: "u"}
		for _, state := range []string{"queued", "running", "success", "failed"} {
			b, _ := json.Marshal(fa.dagRun(&fakeRun{dag: "d", id: testRunID, state: state, conf: map[string]any{"start_date": testStart}}))
			f.Add(b)
		}
	}
	for _, s := range []string{``, `null`, `[]`, `{}`, `{"dag_run_id":"r"}`, `{"state":"success"}`, `{"dag_run_id":1,"state":"success"}`,
		`{"dag_run_id":"r","state":null}`, `{"dag_run_id":"r","state":"success","state":""}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeRun(body)
		if err != nil {
			if r != (dagRun{}) {
				t.Errorf("error %v came with a run %+v", err, r)
			}
			return
		}
		if r.DagRunID == "" || r.State == "" {
			t.Errorf("accepted a run without ID or state: %+v from %q", r, body)
		}
	})
}

// FuzzErrorDetail feeds arbitrary error bodies to the detail extractor,
// whose output goes into error messages and logs: it must be one line of
// valid UTF-8 and bounded in length, whatever a server or proxy sends.
func FuzzErrorDetail(f *testing.F) {
	for _, s := range []string{
		``, `{"detail":"Not Found"}`, `{"detail":{"a":[1,2]}}`, `{"detail":null,"title":"Conflict"}`,
		`{"type":"t","title":"Bad Request","status":400,"detail":"x"}`,
		`{"detail":[{"loc":["body",0,"logical_date"],"msg":"Field required","type":"missing"}]}`,
		`{"detail":[{"loc":null,"msg":"m"},{"loc":[{"x":1}],"msg":"n"}]}`,
		"<html>\n<title>502</title>\r\n</html>", "\xff\xfe", strings.Repeat("a\u2028", 500),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d := errorDetail(body)
		if !utf8.ValidString(d) {
			t.Errorf("detail is not UTF-8: %q", d)
		}
		if strings.ContainsAny(d, "\r\n\t") {
			t.Errorf("detail spans lines: %q", d)
		}
		if n := utf8.RuneCountInString(d); n > maxDetail+1 {
			t.Errorf("detail is %d runes long", n)
		}
	})
}
