package annotate

import (
	"cmp"
	"slices"
	"strings"

	"github.com/sparkpulse/sparkpulse/attempt"
)

// The metrics of an application carry spark.metrics.namespace as their
// applicationid: the application id by default, or what the namespace
// setting says, e.g. ${spark.app.name}. Points about the application are
// tagged with the same key, so that dashboards, the accounting and the
// Executors table join them to its metrics (attempt.MetricsKey);
// spark_app, spark_app_usage and spark_reconcile keep the application id
// in the field app_id.

// tagKey is the applicationid of the attempt's points: its metrics' key,
// or its id where the metrics' key is not known or is shared by a namesake
// running at the same time (whose points would collide with its own).
// Decided at the first point (the properties are read before it) and
// kept, so that all of an attempt's points stay in its series.
func (st *appState) tagKey() string {
	if st.tag == "" {
		st.tag = st.Key.App
		if st.MetricsKey != "" && st.ambiguous() == "" {
			st.tag = st.MetricsKey
		}
	}
	return st.tag
}

// ambiguous says why the stream cannot be read for the attempt alone:
// its metrics are tagged with its name, and another attempt of that name,
// listed by the same source, ran at the same time. (Namespaces shared
// otherwise, e.g. one literal namespace for several applications, are not
// detected.)
func (st *appState) ambiguous() string {
	if st.MetricsKey == "" || st.MetricsKey == st.Key.App || len(st.namesakes) == 0 ||
		st.MetricsKey != attempt.MetricsName(st.Name) {
		return ""
	}
	return "the metrics are tagged with the application's name (spark.metrics.namespace), and " +
		strings.Join(st.namesakes, ", ") + " of the same name ran at the same time: the stream cannot tell them apart"
}

// namesakes gives each attempt of a listing that overlaps another of the
// same name the ids of one or two of those (enough to say why), sorting
// each name's runs by start: a run overlaps another if one that started
// before it ends after its start, or the next to start starts before its
// end. Linear after the sort, however many runs share a name.
func namesakes(byName map[string][]interval) map[attempt.Key][]string {
	out := map[attempt.Key][]string{}
	for _, runs := range byName {
		if len(runs) < 2 {
			continue
		}
		slices.SortFunc(runs, func(a, b interval) int { return cmp.Compare(a.key.Start, b.key.Start) })
		var latest *interval // of the runs before the current one, the one that ends last
		for i := range runs {
			a := &runs[i]
			var ids []string
			if latest != nil && latest.end >= a.key.Start && latest.key.App != a.key.App {
				ids = append(ids, latest.key.App)
			}
			if i+1 < len(runs) && runs[i+1].key.Start <= a.end && runs[i+1].key.App != a.key.App {
				ids = append(ids, runs[i+1].key.App)
			}
			if ids != nil {
				out[a.key] = ids
			}
			if latest == nil || a.end > latest.end {
				latest = a
			}
		}
	}
	return out
}

// interval is an attempt's run, for namesakes.
type interval struct {
	key attempt.Key
	end int64
}
