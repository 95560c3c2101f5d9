package spark

import (
	"bytes"
	"errors"
	"slices"
	"strings"

	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/templates"
)

// Options configure a Mapper.
type Options struct {
	// Prefixes are known GraphiteSink `prefix` values (may contain dots). A
	// path starting with one of them plus "." has it stripped and recorded
	// as the username tag. Without a match the prefix is inferred (see the
	// package documentation).
	Prefixes []string
	// GlobalTags are a block's global `tags`, applied via Result.Finish.
	GlobalTags []templates.Tag
	// Schema is the shape of the points (see Schema); the zero value is
	// the CERN shape.
	Schema schema.Shape
}

// Mapper maps Spark Graphite paths. It is safe for concurrent use.
type Mapper struct {
	prefixes   [][]byte // longest first, so "spark.prod" wins over "spark"
	globalTags []templates.Tag
	wide       bool
}

// NewMapper returns a Mapper for o. Leading and trailing dots of prefixes
// are ignored, and so are empty prefixes.
func NewMapper(o Options) *Mapper {
	m := &Mapper{globalTags: slices.Clone(o.GlobalTags), wide: o.Schema == schema.Wide}
	for _, p := range o.Prefixes {
		if p = strings.Trim(p, "."); p != "" {
			m.prefixes = append(m.prefixes, []byte(p))
		}
	}
	slices.SortStableFunc(m.prefixes, func(a, b []byte) int { return len(b) - len(a) })
	return m
}

var errEmptyPath = errors.New("spark: empty metric path")

// Tag keys. Shared, never modified.
var (
	keyAppName       = []byte(schema.TagAppName)
	keyAppStart      = []byte(schema.TagAppStart)
	keyApplicationID = []byte(schema.TagApplicationID)
	keyID            = []byte(schema.TagID)
	keyListener      = []byte(schema.TagListener)
	keyNamespace     = []byte(schema.TagNamespace)
	keyPool          = []byte(schema.TagPool)
	keyProcess       = []byte(schema.TagProcess)
	keyQueue         = []byte(schema.TagQueue)
	keyUsername      = []byte(schema.TagUsername)
)

// Measurements of jvm.pools.<pool>.<attr>: not contiguous in the path, so
// they are constants.
var (
	poolsInit        = []byte("pools.init")
	poolsUsed        = []byte("pools.used")
	poolsMax         = []byte("pools.max")
	poolsCommitted   = []byte("pools.committed")
	poolsUsage       = []byte("pools.usage")
	poolsUsedAfterGC = []byte("pools.used-after-gc")
)

const (
	dstreamsMarker = ".StreamingMetrics.streaming."
	streamingDot   = "streaming."
)

// Apply maps path into r. It fails only for an empty path; a path it cannot
// classify becomes the measurement, with only the global tags.
func (m *Mapper) Apply(path []byte, r *templates.Result) error {
	r.Reset()
	if len(path) == 0 {
		return errEmptyPath
	}
	var user []byte
	off := 0
	for _, p := range m.prefixes {
		if len(path) > len(p)+1 && path[len(p)] == '.' && string(path[:len(p)]) == string(p) {
			user, off = path[:len(p)], len(p)+1
			break
		}
	}
	if !classify(path, off, user, m.wide, r) {
		r.Measurement = path // like InfluxDB's template without a measurement
	}
	r.Finish(m.globalTags)
	return nil
}

// classify walks the parts of path[off:] once. A driver/executor match ends
// the walk; the first applicationMaster, application and daemon parts are
// remembered and tried afterwards in that order, so that a prefix or an
// app name containing such a word does not hide the driver/executor form.
func classify(path []byte, off int, user []byte, wide bool, r *templates.Result) bool {
	var (
		prevS, prevE   = -1, -1 // the part before the current one
		prev2S, prev2E = -1, -1 // and the one before that
		amS, amE       = -1, -1 // first applicationMaster part
		amNSS, amNSE   = -1, -1 // the part before it
		appE           = -1     // end of the first "application" part
		dS, dE         = -1, -1 // first daemon part
	)
	s := off
	for idx := 0; ; idx++ {
		e := partEnd(path, s)
		last := e == len(path)
		if !last {
			p := path[s:e]
			// EXECID is never the first part, and NS must not be empty.
			if idx >= 1 && prevE > off && isExecID(p) && component(path, off, user, prevS, prevE, s, e, wide, r) {
				return true
			}
			switch string(p) {
			case "applicationMaster":
				if idx >= 1 && amS < 0 {
					amS, amE, amNSS, amNSE = s, e, prevS, prevE
				}
			case "application":
				if appE < 0 {
					appE = e
				}
			case "master", "worker", "shuffleService", "jvm", "CodeGenerator", "HiveExternalCatalog":
				if dS < 0 {
					dS, dE = s, e
				}
			}
		}
		prev2S, prev2E, prevS, prevE = prevS, prevE, s, e
		if last {
			break
		}
		s = e + 1
	}

	// [P.]NS.applicationMaster.METRIC
	if amS >= 0 && amNSE > off && amE+1 < len(path) {
		ns, username := splitNS(path, off, user, amNSS, amNSE)
		source(r, wide, path[amS:amE], path[amE+1:])
		addTag(r, keyApplicationID, ns)
		addTag(r, keyUsername, username)
		return true
	}

	// [P.]application.APPNAME.STARTMILLIS.METRIC: prev2 is the second to
	// last part, prev the last.
	if appE >= 0 && prev2S-1 > appE+1 && prevE > prevS && isMillis(path[prev2S:prev2E]) {
		appS := appE - len("application")
		source(r, wide, path[appS:appE], path[prevS:prevE])
		addTag(r, keyAppName, path[appE+1:prev2S-1])
		addTag(r, keyAppStart, path[prev2S:prev2E])
		if appS > 0 {
			addTag(r, keyUsername, path[:appS-1])
		}
		return true
	}

	// [P.]DAEMON.METRIC
	if dS >= 0 && dE+1 < len(path) {
		ns := path[dS:dE]
		rest := path[dE+1:]
		var pool []byte
		if string(ns) == "jvm" && !wide {
			rest, pool = splitPool(rest)
		}
		source(r, wide, ns, rest)
		addTag(r, keyPool, pool)
		if dS > 0 {
			addTag(r, keyUsername, path[:dS-1])
		}
		return true
	}
	return false
}

// component maps the driver/executor form once an EXECID candidate
// path[xS:xE] has been found; path[nsS:nsE] is the part before it. It
// reports false when no known source follows.
func component(path []byte, off int, user []byte, nsS, nsE, xS, xE int, wide bool, r *templates.Result) bool {
	srcS := xE + 1
	srcE := partEnd(path, srcS)
	if srcE+1 >= len(path) {
		return false // no metric after the source
	}
	src, rest := path[srcS:srcE], path[srcE+1:]
	var ns, id, pool, meas []byte
	switch string(src) {
	case "executor", "ExecutorMetrics", "JVMCPU", "NettyBlockTransfer", "ExternalShuffle",
		"DAGScheduler", "BlockManager", "LiveListenerBus", "appStatus", "ExecutorAllocationManager",
		"CodeGenerator", "HiveExternalCatalog", "plugin", "AccumulatorSource":
		ns, meas = src, rest
	case "jvm":
		ns, meas = src, rest
		if !wide { // wide: the pools are fields of the process's one jvm point
			meas, pool = splitPool(rest)
		}
	case "spark":
		// An app named spark.streaming.… using DStreams is likelier than a
		// query name containing the DStreams marker, so try DStreams first.
		if ns, id, meas = dstreams(path, srcS, srcE); ns != nil {
			break
		}
		if !hasPrefix(rest, streamingDot) {
			return false
		}
		q := rest[len(streamingDot):]
		k := bytes.LastIndexByte(q, '.')
		if k <= 0 || k == len(q)-1 {
			return false // needs a query and a metric
		}
		ns = path[srcS : srcE+1+len("streaming")]
		id, meas = q[:k], q[k+1:]
	default:
		if ns, id, meas = dstreams(path, srcS, srcE); ns == nil {
			return false
		}
	}

	appID, username := splitNS(path, off, user, nsS, nsE)
	var extraKey, extra []byte // the wide shape's identity within a source
	if !wide {
		r.Measurement = meas
	} else {
		r.Measurement, r.Field = ns, meas
		switch string(ns) {
		case "plugin":
			if class := pluginClass(meas); class != nil {
				r.Measurement, r.Field = path[srcS:srcE+1+len(class)], meas[len(class)+1:]
			}
		case "LiveListenerBus":
			r.Field, extraKey, extra = busIdentity(meas)
		}
	}
	// A local slice, so the appends need not reload r.Tags; appID, ns and
	// the process are never empty here.
	tags := append(r.Tags, templates.Tag{Key: keyApplicationID, Value: appID})
	if len(id) > 0 {
		tags = append(tags, templates.Tag{Key: keyID, Value: id})
	}
	if len(extra) > 0 {
		tags = append(tags, templates.Tag{Key: extraKey, Value: extra})
	}
	if !wide {
		tags = append(tags, templates.Tag{Key: keyNamespace, Value: ns})
	}
	if len(pool) > 0 {
		tags = append(tags, templates.Tag{Key: keyPool, Value: pool})
	}
	tags = append(tags, templates.Tag{Key: keyProcess, Value: path[xS:xE]})
	if len(username) > 0 {
		tags = append(tags, templates.Tag{Key: keyUsername, Value: username})
	}
	r.Tags = tags
	return true
}

// source sets the measurement of a metric of source ns: the metric in
// the CERN shape, with the namespace tag, or the source with the metric as
// the field in the wide one.
func source(r *templates.Result, wide bool, ns, metric []byte) {
	if wide {
		r.Measurement, r.Field = ns, metric
		return
	}
	r.Measurement = metric
	addTag(r, keyNamespace, ns)
}

// pluginClass is the class part of a plugin's CLASS.METRIC: up to the
// first part that starts with an upper-case letter, as Java class names
// do and package names do not, or all but the last part when none does;
// nil for a single part.
func pluginClass(meas []byte) []byte {
	for s := 0; s < len(meas); {
		e := partEnd(meas, s)
		if e == len(meas) {
			break
		}
		if c := meas[s]; c >= 'A' && c <= 'Z' {
			return meas[:e]
		}
		s = e + 1
	}
	if k := bytes.LastIndexByte(meas, '.'); k > 0 {
		return meas[:k]
	}
	return nil
}

// busIdentity splits the LiveListenerBus metrics that name a listener or
// a queue, so that every listener and queue adds series rather than
// columns: listenerProcessingTime.CLASS.STAT becomes the field
// listenerProcessingTime.STAT with the tag listener=CLASS, and
// queue.QUEUE.METRIC the field queue.METRIC with queue=QUEUE, for the
// metrics and timer statistics Spark has. Anything else stays a field of
// its own.
func busIdentity(meas []byte) (field, key, value []byte) {
	if t, ok := bytes.CutPrefix(meas, []byte("listenerProcessingTime.")); ok {
		if k := bytes.LastIndexByte(t, '.'); k > 0 {
			if f, ok := busFields[string(t[k+1:])]; ok {
				return f, keyListener, t[:k]
			}
		}
	} else if t, ok := bytes.CutPrefix(meas, []byte("queue.")); ok {
		if k := bytes.IndexByte(t, '.'); k > 0 {
			if f, ok := queueFields[string(t[k+1:])]; ok {
				return f, keyQueue, t[:k]
			}
		}
	}
	return meas, nil, nil
}

// timerStats are the parts a Dropwizard timer is reported in.
var timerStats = []string{"count", "max", "mean", "min", "stddev", "p50", "p75", "p95", "p98", "p99", "p999",
	"m1_rate", "m5_rate", "m15_rate", "mean_rate"}

// busFields and queueFields map what follows the listener or the queue to
// the field's name.
var busFields, queueFields = func() (bus, queue map[string][]byte) {
	bus, queue = map[string][]byte{}, map[string][]byte{}
	for _, st := range timerStats {
		bus[st] = []byte("listenerProcessingTime." + st)
		queue["listenerProcessingTime."+st] = []byte("queue.listenerProcessingTime." + st)
	}
	for _, m := range []string{"size", "numDroppedEvents.count"} {
		queue[m] = []byte("queue." + m)
	}
	return bus, queue
}()

// dstreams matches APPNAME.StreamingMetrics.streaming.METRIC where APPNAME
// starts with the part path[srcS:srcE]. ns is nil without a match.
func dstreams(path []byte, srcS, srcE int) (ns, id, meas []byte) {
	k := bytes.Index(path[srcE:], []byte(dstreamsMarker))
	if k < 0 {
		return nil, nil, nil
	}
	nsS := srcE + k + 1
	measS := nsS + len("StreamingMetrics.")
	if measS+len(streamingDot) >= len(path) {
		return nil, nil, nil // no metric
	}
	return path[nsS : nsS+len("StreamingMetrics")], path[srcS : srcE+k], path[measS:]
}

// splitNS splits [P.]NS, whose last part is path[nsS:nsE], into NS and
// the username (see the package documentation).
func splitNS(path []byte, off int, user []byte, nsS, nsE int) (ns, username []byte) {
	if user == nil && isAppID(path[nsS:nsE]) {
		if nsS > 0 {
			username = path[:nsS-1]
		}
		return path[nsS:nsE], username
	}
	return path[off:nsE], user
}

// splitPool turns pools.POOL.ATTR into the shared measurement pools.ATTR
// and the pool name. Anything else is returned unchanged, without a pool.
func splitPool(rest []byte) (meas, pool []byte) {
	if !hasPrefix(rest, "pools.") {
		return rest, nil
	}
	t := rest[len("pools."):]
	k := bytes.LastIndexByte(t, '.')
	if k <= 0 {
		return rest, nil
	}
	var c []byte
	switch string(t[k+1:]) {
	case "init":
		c = poolsInit
	case "used":
		c = poolsUsed
	case "max":
		c = poolsMax
	case "committed":
		c = poolsCommitted
	case "usage":
		c = poolsUsage
	case "used-after-gc":
		c = poolsUsedAfterGC
	default:
		return rest, nil
	}
	return c, t[:k]
}

// addTag appends a tag unless its value is empty, so that an empty part
// does not block a global tag of the same key.
func addTag(r *templates.Result, key, value []byte) {
	if len(value) > 0 {
		r.Tags = append(r.Tags, templates.Tag{Key: key, Value: value})
	}
}

// partEnd returns the end of the part that starts at path[s]. Parts are
// short, so a plain loop beats bytes.IndexByte's call overhead for the
// first bytes; long parts (app ids, class names) go to the vector search.
func partEnd(path []byte, s int) int {
	end := min(s+8, len(path))
	for i := s; i < end; i++ {
		if path[i] == '.' {
			return i
		}
	}
	if i := bytes.IndexByte(path[end:], '.'); i >= 0 {
		return end + i
	}
	return len(path)
}

func isExecID(p []byte) bool {
	return string(p) == "driver" || allDigits(p)
}

// isMillis reports whether p is an epoch-millisecond time of 13 digits
// (2001 to 2286), as in the applications instance's names.
func isMillis(p []byte) bool {
	return len(p) == 13 && allDigits(p)
}

// IsAppID reports whether id has the shape of a spark.app.id, as Spark
// makes them: local-\d+, app-\d{14}-\d{4,}, application_\d+_\d+,
// spark-[0-9a-f]{32} or spark-application-\d+, and at most MaxAppIDLength
// bytes. Only such ids are tagged as applications by the built-in mapping,
// and only they fill a REST source's {app_id}.
func IsAppID(id []byte) bool { return len(id) <= MaxAppIDLength && isAppID(id) }

// MaxAppIDLength bounds an application id: Spark's longest forms are
// about 40 bytes.
const MaxAppIDLength = 64

// isAppID is IsAppID without the length bound. Hand-written because it
// runs for most lines.
func isAppID(p []byte) bool {
	switch {
	case hasPrefix(p, "application_"):
		t := p[len("application_"):]
		n := leadingDigits(t)
		return n > 0 && n < len(t) && t[n] == '_' && allDigits(t[n+1:])
	case hasPrefix(p, "app-"):
		t := p[len("app-"):]
		return len(t) >= 14+1+4 && leadingDigits(t) == 14 && t[14] == '-' && allDigits(t[15:])
	case hasPrefix(p, "local-"):
		return allDigits(p[len("local-"):])
	case hasPrefix(p, "spark-application-"):
		return allDigits(p[len("spark-application-"):])
	case hasPrefix(p, "spark-"):
		t := p[len("spark-"):]
		if len(t) != 32 {
			return false
		}
		for _, c := range t {
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
		return true
	}
	return false
}

// leadingDigits returns how many ASCII digits p starts with.
func leadingDigits(p []byte) int {
	for i, c := range p {
		if c < '0' || c > '9' {
			return i
		}
	}
	return len(p)
}

// allDigits reports whether p is non-empty and all ASCII digits.
func allDigits(p []byte) bool {
	return len(p) > 0 && leadingDigits(p) == len(p)
}

func hasPrefix(p []byte, s string) bool {
	return len(p) >= len(s) && string(p[:len(s)]) == s
}
