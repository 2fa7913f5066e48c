package config

import (
	"os"
	"path/filepath"

	"github.com/refill-dev/refill"
)

// peekConfig is the part of refill.yaml that says where secrets are kept.
type peekConfig struct {
	State     string     `yaml:"state"`
	StateEnv  string     `yaml:"state_env"`
	StateFile string     `yaml:"state_file"`
	Audit     *rawAudit  `yaml:"audit"`
	Notify    *rawNotify `yaml:"notify"`
	Datasets  map[string]*struct {
		Job *struct {
			Airflow *rawAirflow `yaml:"airflow"`
		} `yaml:"job"`
	} `yaml:"datasets"`
}

// Secrets reads where the refill.yaml at path keeps refill's secrets,
// and the directory their files are relative to, for a process that must
// know them before it does anything else (package secret, at start). It
// is cheap — one YAML decode of a few keys, leniently, with no checks, no
// dbt manifest and no policy — and a file Load would refuse may still
// give its secrets here: Load, later, reports what is wrong with it.
func Secrets(path string) (dir string, secrets []refill.Secret, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return "", nil, err
	}
	var raw peekConfig
	if err := decode(data, &raw, false); err != nil {
		return "", nil, err
	}
	cfg := &refill.Config{StateEnv: raw.StateEnv, StateFile: raw.StateFile, Audit: auditOf(raw.Audit),
		Notify: notifyOf(raw.Notify), Datasets: map[string]*refill.Dataset{}}
	for name, d := range raw.Datasets {
		if d != nil && d.Job != nil && d.Job.Airflow != nil {
			a := d.Job.Airflow
			cfg.Datasets[name] = &refill.Dataset{Name: name, Job: &refill.Job{Kind: refill.JobAirflow, Airflow: &refill.AirflowJob{
				UsernameEnv: a.UsernameEnv, UsernameFile: a.UsernameFile, PasswordEnv: a.PasswordEnv, PasswordFile: a.PasswordFile}}}
		}
	}
	return filepath.Dir(abs), cfg.Secrets(), nil
}
