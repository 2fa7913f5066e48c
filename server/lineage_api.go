package server

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/openlineage"
)

// lineageAnswer is the answer to POST /api/v1/lineage: what was recorded,
// and which refill datasets the event's datasets matched, so a producer's
// owner can see at once whether refill recognises their tables.
type lineageAnswer struct {
	RunID    string           `json:"run_id"`
	Job      openlineage.Job  `json:"job"`
	Edges    int              `json:"edges"`
	NewEdges int              `json:"new_edges"`
	Inputs   []matchedDataset `json:"inputs"`
	Outputs  []matchedDataset `json:"outputs"`
}

type matchedDataset struct {
	openlineage.Dataset
	// Datasets are the refill datasets it matched; none when refill does
	// not manage it.
	Datasets []string `json:"datasets"`
}

// postLineage takes an OpenLineage RunEvent (docs/design.md §7a) and records
// its input → output edges. The event is validated first (400 naming the
// field by its JSON pointer) and nothing is recorded unless it is valid.
// Recording is idempotent: the same event again adds nothing.
func (s *Server) postLineage(w http.ResponseWriter, r *http.Request, user string) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		s.writeError(w, r, refill.BadInputf("request body: Content-Type %q: want application/json (an OpenLineage RunEvent)", ct))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.writeError(w, r, refill.BadInputf("request body: larger than %d bytes", MaxBody))
			return
		}
		s.writeError(w, r, refill.BadInputf("request body: %v", err))
		return
	}
	ev, err := openlineage.Parse(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	edges, added, err := s.ctl().RecordLineage(r.Context(), user, ev)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	m := openlineage.NewMatcher(s.conf().Datasets)
	matched := func(ds []openlineage.Dataset) []matchedDataset {
		out := make([]matchedDataset, len(ds))
		for i, d := range ds {
			out[i] = matchedDataset{Dataset: d, Datasets: m.Match(d)}
			if out[i].Datasets == nil {
				out[i].Datasets = []string{}
			}
		}
		return out
	}
	writeJSON(w, http.StatusCreated, lineageAnswer{RunID: ev.RunID, Job: ev.Job, Edges: len(edges), NewEdges: added,
		Inputs: matched(ev.Inputs), Outputs: matched(ev.Outputs)})
}
