package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// secretProject writes doc as refill.yaml in a directory of its own, with the
// files given (name -> content, mode 0600), and returns the config's path.
func secretProject(t *testing.T, doc string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "refill.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// requireAt checks that err is bad input with a line saying
// refill.yaml:LINE: KEY: ...MSG..., LINE being the line of doc marked # <-.
func requireAt(t *testing.T, err error, doc, key, msg string) {
	t.Helper()
	if !errors.Is(err, refill.ErrBadInput) {
		t.Fatalf("err = %v, want bad input at %s saying %q", err, key, msg)
	}
	at := fmt.Sprintf("refill.yaml:%d: %s: ", markedLine(t, doc), key)
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.Contains(l, at) && strings.Contains(l, msg) {
			return
		}
	}
	t.Errorf("no error line has %q and %q; got:\n%v", at, msg, err)
}

// TestSecretsFromFiles: every secret a *_env key names may be a file
// instead, relative to refill.yaml; Secrets lists each where it is kept.
func TestSecretsFromFiles(t *testing.T) {
	doc := head + `state_file: secrets/state
audit: {key_file: secrets/audit}
notify:
  slack: {webhook_url_file: secrets/hook, signing_secret_file: /SIGNING, bot_token_file: secrets/bot, channel: C1}
  webhooks: [{url: "http://127.0.0.1:9/h", secret_file: secrets/wh}]
datasets:
  dag:
    job:
      airflow: {url: "http://af", dag_id: d, username_file: secrets/af_user, password_env: AF_PASSWORD}
`
	files := map[string]string{"secrets/state": "postgres://u:pw@h/db\n", "secrets/audit": "k\n", "secrets/hook": "h",
		"secrets/signing": "s", "secrets/bot": "b", "secrets/wh": "w", "secrets/af_user": "u"}
	path := secretProject(t, "", files)
	dir := filepath.Dir(path)
	doc = strings.Replace(doc, "/SIGNING", filepath.Join(dir, "secrets/signing"), 1)
	cfg, err := Parse([]byte(doc), path)
	if err != nil {
		t.Fatal(err)
	}
	want := []refill.Secret{
		{Key: "audit.key_file", File: "secrets/audit", Own: true},
		{Key: "state_file", File: "secrets/state", Own: true},
		{Key: "notify.slack.webhook_url_file", File: "secrets/hook", Own: true},
		{Key: "notify.slack.signing_secret_file", File: filepath.Join(dir, "secrets/signing"), Own: true},
		{Key: "notify.slack.bot_token_file", File: "secrets/bot", Own: true},
		{Key: "notify.webhooks[0].secret_file", File: "secrets/wh", Own: true},
		{Key: "datasets.dag.job.airflow.username_file", File: "secrets/af_user"},
		{Key: "datasets.dag.job.airflow.password_env", Env: "AF_PASSWORD"},
	}
	if got := cfg.Secrets(); !slices.Equal(got, want) {
		t.Errorf("Secrets() =\n%+v\nwant\n%+v", got, want)
	}
	if cfg.State != "" || cfg.StateSecret() != want[1] {
		t.Errorf("state %q, StateSecret %+v: want the DSN kept out of the config", cfg.State, cfg.StateSecret())
	}
	if got := cfg.Datasets["dag"].Job.Airflow.In(dir).UsernameFile; got != filepath.Join(dir, "secrets/af_user") {
		t.Errorf("the Airflow user's file resolves to %s", got)
	}

	// The same names, cheaply, before anything else runs — from a
	// config Load would refuse (an unknown key).
	if err := os.WriteFile(path, []byte(doc+"bogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gotDir, got, err := Secrets(path)
	if err != nil || gotDir != dir || !slices.Equal(got, want) {
		t.Errorf("Secrets(%s) = %s, %+v, %v", path, gotDir, got, err)
	}
}

func TestSecretErrors(t *testing.T) {
	const job = "datasets:\n  e:\n    job:\n      command: [./x]\n"
	const pgState = "state: postgres://refill@127.0.0.1/state\n"
	tests := []struct {
		name, doc, key, msg string
	}{
		{"both forms", head + "audit:\n  key_env: K\n  key_file: key # <-\n", "audit.key_file", "give key_env or key_file, not both"},
		{"missing file", head + "audit:\n  key_file: nope/key # <-\n", "audit.key_file", "cannot read nope/key ("},
		{"empty file", head + "notify:\n  slack:\n    signing_secret_file: empty # <-\n", "notify.slack.signing_secret_file", "is empty"},
		{"a directory", head + "notify:\n  webhooks:\n    - url: http://h\n      secret_file: secrets # <-\n", "notify.webhooks[0].secret_file", "is not a regular file"},
		{"airflow file missing", head + "datasets:\n  e:\n    job:\n      airflow:\n        url: http://af\n        dag_id: d\n        username_env: U\n        password_file: af # <-\n", "datasets.e.job.airflow.password_file", "cannot read af"},
		{"airflow half credentials", head + "datasets:\n  e:\n    job:\n      airflow: # <-\n        url: http://af\n        dag_id: d\n        username_file: key\n", "datasets.e.job.airflow", "both username_env and password_env"},
		{"state twice", head + "state: sqlite:s.db\nstate_env: REFILL_STATE # <-\n", "state_env", "give one of state, state_env and state_file, not both state and state_env"},
		{"state twice, file first", head + "state_file: key\nstate: sqlite:s.db # <-\n", "state", "not both state_file and state"},
		{"state file missing", head + "state_file: state.dsn # <-\n", "state_file", "cannot read state.dsn"},
		{"state env a value", head + "state_env: 'postgres://u:pw@h/db' # <-\n", "state_env", "name of an environment variable"},

		// A job that passes through a variable of refill's own.
		{"job names the default audit key", head + job + "      env:\n        - REFILL_AUDIT_KEY # <-\n", "datasets.e.job.env[0]", "REFILL_AUDIT_KEY holds a secret of refill's own (audit.key_env): refill keeps it for itself"},
		{"job names the audit key", head + "audit: {key_env: AUDIT}\n" + job + "      env:\n        - A=1\n        - AUDIT # <-\n", "datasets.e.job.env[1]", "refill keeps it for itself"},
		{"job names the default while a file holds the key", head + "audit: {key_file: key}\n" + job + "      env: [REFILL_AUDIT_KEY] # <-\n", "datasets.e.job.env[0]", "(audit.key_env, by default)"},
		{"job names Slack's secret", head + "notify: {slack: {signing_secret_env: SLACK_SIGNING_SECRET}}\n" + job + "      env: [SLACK_SIGNING_SECRET] # <-\n", "datasets.e.job.env[0]", "(notify.slack.signing_secret_env): refill keeps it for itself"},
		{"job names Slack's bot token", head + "notify: {slack: {bot_token_env: SLACK_BOT_TOKEN, channel: C}}\n" + job + "      env: [SLACK_BOT_TOKEN] # <-\n", "datasets.e.job.env[0]", "(notify.slack.bot_token_env)"},
		{"job names a webhook's secret", head + "notify: {webhooks: [{url: 'http://h', secret_env: HOOK}]}\n" + job + "      env: [HOOK] # <-\n", "datasets.e.job.env[0]", "(notify.webhooks[0].secret_env)"},
		{"job names the state DSN", head + "state_env: REFILL_STATE\n" + job + "      env: [REFILL_STATE] # <-\n", "datasets.e.job.env[0]", "(state_env)"},
		{"job names the state store's password", head + pgState + job + "      env: [PGPASSWORD] # <-\n", "datasets.e.job.env[0]", "PGPASSWORD holds a secret of refill's own (state, for its PostgreSQL password)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := secretProject(t, "", map[string]string{"key": "k", "empty": "", "secrets/x": "x"})
			_, err := Parse([]byte(tt.doc), path)
			requireAt(t, err, tt.doc, tt.key, tt.msg)
		})
	}
}

// TestJobsMayNameOtherSecrets: a command job may still name a secret that
// is not refill's own — the warehouse's PGPASSWORD, an Airflow job's
// credentials — and fixed values under any name.
func TestJobsMayNameOtherSecrets(t *testing.T) {
	for _, doc := range []string{
		"version: 1\nwarehouse: postgres://wh@127.0.0.1/wh\nstate: postgres://st@127.0.0.1/st\ndatasets:\n  e:\n    job: {command: [./x], env: [PGPASSWORD]}\n",
		head + "datasets:\n  e:\n    job: {command: [./x], env: [PGPASSWORD, AF_PASSWORD, REFILL_AUDIT_KEY=not-the-key]}\n  f:\n    job: {airflow: {url: 'http://af', dag_id: d, username_env: AF_USER, password_env: AF_PASSWORD}}\n",
	} {
		if _, err := Parse([]byte(doc), ""); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

// jobUserProject is a project directory the user nobody can work in, as
// run.job_user needs: the directory, the warehouse and its directory
// writable by nobody. It returns the config's path.
func jobUserProject(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making files nobody's takes root")
	}
	path := secretProject(t, "", map[string]string{"wh.db": "", "audit.key": "k"})
	dir := filepath.Dir(path)
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "wh.db")} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestJobUser: run.job_user resolves the user command jobs run as.
func TestJobUser(t *testing.T) {
	path := jobUserProject(t)
	doc := head + "audit: {key_file: audit.key}\nrun: {job_user: nobody}\n"
	cfg, err := Parse([]byte(strings.Replace(doc, "w.db", "wh.db", 1)), path)
	if err != nil {
		t.Fatal(err)
	}
	if u := cfg.Run.JobUser; u == nil || u.Name != "nobody" || u.UID != 65534 || u.GID != 65534 || u.Home == "" {
		t.Errorf("job user %+v", u)
	}
}

func TestJobUserErrors(t *testing.T) {
	t.Run("unknown user", func(t *testing.T) {
		doc := head + "run:\n  job_user: no-such-user # <-\n"
		_, err := Parse([]byte(doc), "")
		requireAt(t, err, doc, "run.job_user", `no user "no-such-user" on this machine`)
	})
	t.Run("refill is not root", func(t *testing.T) {
		defer func(f func() int) { geteuid = f }(geteuid)
		geteuid = func() int { return 1000 }
		doc := head + "run:\n  job_user: nobody # <-\n"
		_, err := Parse([]byte(doc), "")
		requireAt(t, err, doc, "run.job_user", "refill runs as uid 1000, not as root, so it cannot start jobs as nobody (uid 65534)")
	})
	t.Run("unwritable warehouse", func(t *testing.T) {
		path := jobUserProject(t)
		wh := filepath.Join(filepath.Dir(path), "wh.db")
		if err := os.Chown(wh, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(wh, 0o644); err != nil {
			t.Fatal(err)
		}
		doc := "version: 1\nwarehouse: sqlite:wh.db\nrun:\n  job_user: nobody # <-\n"
		_, err := Parse([]byte(doc), path)
		requireAt(t, err, doc, "run.job_user", "command jobs write the warehouse "+wh+" as nobody, who cannot write "+wh+": "+wh+" has owner root, group root, mode -rw-r--r--")
	})
	t.Run("unwritable working directory", func(t *testing.T) {
		path := jobUserProject(t)
		dir := filepath.Dir(path)
		if err := os.Chown(dir, 0, 0); err != nil {
			t.Fatal(err)
		}
		doc := "version: 1\nwarehouse: sqlite:wh.db\nrun:\n  job_user: nobody # <-\n"
		_, err := Parse([]byte(doc), path)
		requireAt(t, err, doc, "run.job_user", "command jobs run in the config's directory "+dir+", as nobody, who cannot write it: "+dir+" has owner root, group root, mode drwxr-xr-x")
	})
	t.Run("a secret nobody can read", func(t *testing.T) {
		path := jobUserProject(t)
		key := filepath.Join(filepath.Dir(path), "audit.key")
		if err := os.Chmod(key, 0o644); err != nil {
			t.Fatal(err)
		}
		doc := "version: 1\nwarehouse: sqlite:wh.db\naudit:\n  key_file: audit.key # <-\nrun: {job_user: nobody}\n"
		_, err := Parse([]byte(doc), path)
		requireAt(t, err, doc, "audit.key_file", "nobody can read "+key+", and command jobs run as nobody (run.job_user)")
	})
}
