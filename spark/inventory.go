package spark

import "github.com/sparkpulse/sparkpulse/templates"

// InventoryName names a metric mapped by the built-in mapping, for an
// inventory of what a Spark version sends: who sends it (driver,
// executor, application for the standalone master's per-application
// source, daemon for a master, worker or shuffle service), its source
// (the namespace tag), its measurement, and the JVM memory pool where
// there is one, e.g. "executor executor cpuTime.count" or
// "driver jvm pools.used pool=G1-Eden-Space". A path the mapping does not
// recognise ("anything else": no namespace) has no name: "".
func InventoryName(r *templates.Result) string {
	var ns, process, pool string
	for _, t := range r.Tags {
		switch string(t.Key) {
		case string(keyNamespace):
			ns = string(t.Value)
		case string(keyProcess):
			process = string(t.Value)
		case string(keyPool):
			pool = string(t.Value)
		}
	}
	if ns == "" {
		return ""
	}
	role := "daemon"
	switch {
	case process == "driver":
		role = "driver"
	case process != "":
		role = "executor"
	case ns == "application":
		role = "application"
	}
	n := role + " " + ns + " " + string(r.Measurement)
	if pool != "" {
		n += " pool=" + pool
	}
	return n
}
