package config

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/refill-dev/refill"
)

// rawOpenLineage is a dataset's openlineage: key, its name in OpenLineage
// events when its table would not match them (openlineage.Matcher).
type rawOpenLineage struct {
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
}

// maxOpenLineageName bounds an OpenLineage namespace or name in the config.
const maxOpenLineageName = 1024

// openLineageName checks a dataset's openlineage: key: both parts given,
// as the events write them, with no surrounding spaces or control
// characters, since they are compared exactly with what producers send.
func (c *converter) openLineageName(path string, raw *rawOpenLineage) *refill.OpenLineageName {
	if raw == nil {
		return nil
	}
	ok := true
	for _, f := range []struct{ key, val, example string }{
		{"namespace", raw.Namespace, "postgres://db.internal:5432"},
		{"name", raw.Name, "analytics.public.events_daily"},
	} {
		p := child(path, f.key)
		switch {
		case f.val == "":
			c.errorf(p, "required: the %s OpenLineage events give this dataset, as in %s", f.key, f.example)
		case len(f.val) > maxOpenLineageName:
			c.errorf(p, "is %d bytes long, over the limit of %d", len(f.val), maxOpenLineageName)
		case !utf8.ValidString(f.val) || strings.ContainsFunc(f.val, unicode.IsControl):
			c.errorf(p, "%q holds a control character or invalid UTF-8", clip(f.val))
		case strings.TrimSpace(f.val) != f.val:
			c.errorf(p, "%q starts or ends with a space; events are matched exactly", f.val)
		default:
			continue
		}
		ok = false
	}
	if !ok {
		return nil
	}
	return &refill.OpenLineageName{Namespace: raw.Namespace, Name: raw.Name}
}

// openLineageNames refuses two datasets pinned to one OpenLineage name:
// an event about it could not say which of them it means.
func (c *converter) openLineageNames(cfg *refill.Config) {
	first := map[refill.OpenLineageName]string{}
	for _, name := range sortedKeys(cfg.Datasets) {
		d := cfg.Datasets[name]
		if d == nil || d.OpenLineage == nil {
			continue
		}
		if other, ok := first[*d.OpenLineage]; ok {
			a, b := other, name
			if cfg.Datasets[b].Line < cfg.Datasets[a].Line {
				a, b = b, a
			}
			c.errorf(child("datasets", b, "openlineage"), "namespace %q name %q is also the OpenLineage name of dataset %s (line %d); one event dataset cannot be two refill datasets",
				d.OpenLineage.Namespace, d.OpenLineage.Name, a, cfg.Datasets[a].Line)
			continue
		}
		first[*d.OpenLineage] = name
	}
}
