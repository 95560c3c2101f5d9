// Package templates implements the template language of InfluxDB 1.x's
// [[graphite]] service, which maps a Graphite path such as
// "servers.host1.cpu.load" to a measurement, a field key and tags.
//
// # Language
//
// Each entry of a template list is "[filter] template [tags]", split on
// white space:
//
//   - filter: "."-separated sections, each a literal or exactly "*". A filter
//     is a positional prefix match ("servers.*" matches
//     "servers.host1.cpu.load"). An entry without a filter is the default
//     template; there may be at most one.
//   - template: "."-separated parts, one per path part: "measurement",
//     "measurement*" (this part and all the rest), "field", "field*" (idem),
//     "" (skip the part) or any other word, which names a tag. Repeated
//     measurement or tag parts are joined with the separator.
//   - tags: "k=v[,k=v...]", added to the points of that template.
//
// The path and the filters are always split on "."; the separator only
// joins parts back together.
//
// # Compatibility
//
// Compile accepts exactly the lists influxd 1.8.10 (and later 1.x) starts
// with, and Apply gives exactly the measurement, field and tags that
// influxd would write for a path, including the behaviour users trip over:
//
//   - no backtracking: a path follows a literal filter section over a "*"
//     one and keeps the result of that branch even when it holds no
//     template, so it falls to the default template
//     (influxdata/influxdb#14621);
//   - insertion-order inheritance: a "*" node of the filter tree copies its
//     parent's template when it is created, in config order, and never
//     later, so the outcome can depend on the order of the entries
//     (influxdata/influxdb#5989);
//   - the built-in default "measurement*" joins with "." whatever the
//     separator, per-template tags are concatenated with extracted tags of
//     the same key, parts after "measurement*" or "field*" are ignored, and
//     "field" used twice fails per line.
//
// Engine.Warnings points at templates that these rules make unreachable
// for some paths. Error messages keep influxd's text after a prefix naming
// the entry; positions in the prefix count from 1, while positions inside
// influxd's own messages count from 0, as influxd prints them.
package templates
