package jobs

import (
	"context"
	"reflect"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/jobs/airflow"
	"github.com/refill-dev/refill/jobs/command"
	"github.com/refill-dev/refill/jobs/query"
)

func TestForChoosesOneRunnerPerKind(t *testing.T) {
	client := &airflow.Client{}
	user := &refill.JobUser{Name: "jobs", UID: 1001, GID: 1001}
	withheld := map[string]string{"PGPASSWORD": "pw"}
	deps := Deps{Dir: "/p", WorkDir: "/scratch", Hidden: []string{"KEY"}, Withheld: withheld, User: user, Airflow: client}
	for _, tc := range []struct {
		kind          refill.JobKind
		want          refill.JobRunner
		transactional bool
	}{
		{refill.JobQuery, query.Runner{}, true},
		{refill.JobSQL, query.Runner{}, true},
		{refill.JobCommand, command.Runner{Dir: "/p", WorkDir: "/scratch", Hidden: []string{"KEY"}, Withheld: withheld, User: user}, false},
		{refill.JobAirflow, airflow.Runner{Client: client, Dir: "/p"}, false},
	} {
		jr, err := For(tc.kind, deps)
		if err != nil {
			t.Errorf("For(%s): %v", tc.kind, err)
			continue
		}
		if !reflect.DeepEqual(jr, tc.want) {
			t.Errorf("For(%s) = %#v, want %#v", tc.kind, jr, tc.want)
		}
		if jr.Transactional() != tc.transactional {
			t.Errorf("For(%s).Transactional() = %v, want %v", tc.kind, jr.Transactional(), tc.transactional)
		}
	}
	if _, err := For("cron", deps); err == nil {
		t.Error("For(cron): no error for a kind that does not exist")
	}
}

func TestAirflowWithoutClientRefuses(t *testing.T) {
	jr, err := For(refill.JobAirflow, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	d := &refill.Dataset{Name: "dag", Job: &refill.Job{Kind: refill.JobAirflow, Airflow: &refill.AirflowJob{DagID: "d"}}}
	if _, err := jr.Build(context.Background(), nil, d, refill.JobRun{Partition: "2026-11-01"}); err == nil {
		t.Error("an airflow job built without an Airflow client")
	}
}
