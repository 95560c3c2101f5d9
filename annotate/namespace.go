package annotate

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
)

// The metrics of an application carry spark.metrics.namespace as their
// applicationid: the application id by default, or what the namespace
// setting says, e.g. ${spark.app.name}. Points about the application are
// tagged with the same key, so that dashboards, the accounting and the
// Executors table join them to its metrics; spark_app, spark_app_usage and
// spark_reconcile keep the application id in the field app_id.

var (
	configRef  = regexp.MustCompile(`\$\{([^}]*)\}`)
	whitespace = regexp.MustCompile(`\s+`)
)

// metricsKey is the applicationid the application's metrics carry, from
// its Spark properties: spark.metrics.namespace with ${…} references to
// other properties resolved as Spark resolves them (an unknown reference
// stays as written), then sanitised as Dropwizard's GraphiteReporter
// sanitises a name (trimmed, each run of white space one dash); the
// application id without the setting.
func metricsKey(appID string, props map[string]string) string {
	ns := props["spark.metrics.namespace"]
	if strings.TrimSpace(ns) == "" {
		return appID
	}
	ns = configRef.ReplaceAllStringFunc(ns, func(ref string) string {
		if v, ok := props[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
	if ns = whitespace.ReplaceAllString(strings.TrimSpace(ns), "-"); ns == "" {
		return appID
	}
	return ns
}

// tagKey is the applicationid of the attempt's points: its metrics' key,
// or its id where the metrics' key is not known or is shared by a namesake
// running at the same time (whose points would collide with its own).
// Decided at the first point (the properties are read before it) and
// kept, so that all of an attempt's points stay in its series.
func (st *appState) tagKey() string {
	if st.tag == "" {
		st.tag = st.key.app
		if st.metricsKey != "" && st.ambiguous() == "" {
			st.tag = st.metricsKey
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
	if st.metricsKey == "" || st.metricsKey == st.key.app || len(st.namesakes) == 0 ||
		st.metricsKey != whitespace.ReplaceAllString(strings.TrimSpace(st.name), "-") {
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
func namesakes(byName map[string][]interval) map[appKey][]string {
	out := map[appKey][]string{}
	for _, runs := range byName {
		if len(runs) < 2 {
			continue
		}
		slices.SortFunc(runs, func(a, b interval) int { return cmp.Compare(a.key.start, b.key.start) })
		var latest *interval // of the runs before the current one, the one that ends last
		for i := range runs {
			a := &runs[i]
			var ids []string
			if latest != nil && latest.end >= a.key.start && latest.key.app != a.key.app {
				ids = append(ids, latest.key.app)
			}
			if i+1 < len(runs) && runs[i+1].key.start <= a.end && runs[i+1].key.app != a.key.app {
				ids = append(ids, runs[i+1].key.app)
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
	key appKey
	end int64
}
