package attempt

import (
	"regexp"
	"strings"
)

var (
	configRef  = regexp.MustCompile(`\$\{([^}]*)\}`)
	whitespace = regexp.MustCompile(`\s+`)
)

// MetricsKey is the applicationid an application's metrics carry, from
// its Spark properties: spark.metrics.namespace with ${…} references to
// other properties resolved as Spark resolves them (an unknown reference
// stays as written), then sanitised as Dropwizard's GraphiteReporter
// sanitises a name (trimmed, each run of white space one dash); the
// application id without the setting.
func MetricsKey(appID string, props map[string]string) string {
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
	if ns = MetricsName(ns); ns == "" {
		return appID
	}
	return ns
}

// MetricsName is a name as Dropwizard's GraphiteReporter writes it:
// trimmed, each run of white space one dash.
func MetricsName(s string) string {
	return whitespace.ReplaceAllString(strings.TrimSpace(s), "-")
}
