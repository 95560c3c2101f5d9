// Package delta turns cumulative counters, such as Spark's task metrics,
// into exact per-interval deltas at ingest, so that summing the deltas over
// any time interval and any number of processes gives the counters' exact
// increase. A counter only grows while its process lives and restarts from
// zero with the process.
//
// # Counter rules
//
// The caller keeps each series' last sample, a [State], with the series
// (package relay keeps it in its series cache, so that a line costs one
// lookup). A [Tracker] applies these rules, in this order, to each new
// sample ([Tracker.Update] returns the [Outcome]) and counts them:
//
//  1. A series is what the caller keeps one State for. Saved state names
//     it by an [ID], [Tracker.ID] of a key the caller builds (relay: the
//     target bucket and the point's text up to its value): SipHash-2-4's
//     128-bit keyed hash under the tracker's [Seed], a key chosen at
//     random when no state was saved and kept in the state file, so that
//     IDs are stable across restarts and versions yet no sender can
//     predict them or make two keys share one.
//  2. Normal sample: value ≥ the previous value and timestamp after the
//     previous one: delta = value − previous, rate = delta ÷ (ts − previous
//     ts, in seconds). Outcome Delta.
//  3. Reset: value < the previous value (JVM restart, an app name reused as
//     spark.metrics.namespace, a YARN re-attempt): the counter restarted
//     from zero, so delta = value and rate = value ÷ dt. Outcome Delta with
//     Reset set; counted in Stats.Resets.
//  4. First sample of a series once the tracker has been up (now − start)
//     longer than FirstSampleGrace (default 20 s, 2 Spark report periods):
//     the series is new and its baseline is zero, so delta = value, with no
//     rate. Outcome FirstNew. With NoGrace every first sample is new.
//  5. First sample within the grace period: the baseline is unknown (we may
//     have started in the middle of an application), so no delta; the
//     sample becomes the baseline. Outcome FirstUnknown. Series restored by
//     [Tracker.Load] are not first.
//  6. Duplicate or out-of-order sample, timestamp ≤ the series' last one
//     (Spark reports twice in the same second at shutdown; UDP reorders): no
//     delta, the baseline does not move. Outcome OutOfOrder.
//  7. A series not updated, by receive time, for longer than IdleTTL
//     (default 15 min) may be dropped by the caller, which says so with
//     [Tracker.Forget]; it is new again if it comes back (relay drops such
//     series after between IdleTTL and IdleTTL plus a minute). Counted in
//     Stats.Evicted. A caller letting series go asks [Tracker.Expire]
//     which to keep: it forgets the idle ones, and reports the live ones
//     the caller has no room for as lost (rule 8).
//  8. While MaxSeries series have a baseline (default 1 000 000), a new
//     series gets none: no delta. Outcome Refused. So does a new series
//     of an application that has MaxSeriesPerApp of them (default
//     250 000; outcome RefusedQuota), so that one flood of series cannot
//     fill the table for every application. Existing series are
//     never dropped to make room, since a dropped live series would come
//     back with a baseline of zero and a wrong delta: wrong deltas are worse
//     than missing ones. For the same reason, for IdleTTL after the last
//     MaxSeries refusal — or after the caller had to drop live series'
//     baselines ([Tracker.Lost]) — a first sample is treated as by rule 5
//     (FirstUnknown), since it may come from a series that has been
//     counting all along; and a refused series, when admitted, gives no
//     delta for its first tracked sample.
//  9. A sample dated more than MaxFuture (default 2 min) after its receive
//     time gives no delta and leaves the baseline as it was: outcome
//     Future, counted in Stats.Future. Otherwise a forged line dated years
//     ahead would hold every genuine sample out of order (rule 6) until
//     then. A baseline dated that far ahead (state saved before this
//     rule, or a clock stepped back) is replaced by the next sample, with
//     no delta, counted in Stats.Rebased.
//  10. A value no counter can have — negative, or 2^63 and more, beyond a
//     Java long — gives no delta and leaves the baseline as it was:
//     outcome NotCounter, counted in Stats.NotCounter. It is refused,
//     never cast: its delta would overflow every sum it entered.
//
// Rules 9 and 10 are checked first. Values must be finite; the Graphite
// parser refuses NaN and ±Inf.
// Timestamps are unix nanoseconds: ts is the sample's own time, now the time
// it was received.
//
// [Tracker.Save] and [Tracker.Load] keep the states across restarts, in a
// checksummed binary file that holds the Seed; [Tracker.Restore] hands a
// loaded state to its series when it is first seen. A file saved longer
// than IdleTTL ago is refused ([ErrStale]), and so are entries idle for
// longer than IdleTTL, and a file of an older format ([ErrOldFormat]).
//
// [OpenState] keeps that file in a directory (state-dir): it returns the
// tracker with the last run's baselines and a [Store] whose Save replaces
// the file atomically. A missing, stale, damaged or older file starts the
// tracker without baselines, with a warning: one interval of deltas is
// lost, never a wrong one.
//
// # Which series are cumulative
//
// [Rules] tell cumulative series from the others by their Graphite path or
// their measurement. A pattern is a list of dot-separated segments, each one
// of:
//
//   - a literal, which matches itself;
//   - *, which matches exactly one segment, whatever its text;
//   - {a,b,c}, which matches one segment equal to one of the literals.
//
// The first segment may also be **, which matches any number (zero or more)
// of leading segments: "**.executor.cpuTime.count" matches any path that
// ends in those three segments. Without ** a pattern must match the whole
// path. Nothing else is special, and partial wildcards such as "ab*" are
// rejected. The first rule (in the order given) with a matching path or
// measurement pattern decides; a rule with Cumulative false is an exception
// to the rules after it.
package delta
