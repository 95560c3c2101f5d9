package main

import (
	"runtime"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/queue"
	"github.com/sparkpulse/sparkpulse/relay"
)

// statsCollector exposes the counters that listeners, relays and writers
// keep as plain atomics, reading them at scrape time so that the per-line
// path never touches Prometheus.
//
// Every labelled counter is exported for each of its label values from
// the first scrape, at 0 until its first event, so that rate() and alerts
// over it have data: the values come from the lists their packages export
// (relay.Reason, influx.DropReasons, annotate.ErrorKinds...).
type statsCollector struct{ p *pipeline }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("sparkpulse_"+name, help, append([]string{"listener"}, labels...), nil)
}

var (
	descConnsActive   = desc("graphite_connections_active", "Open TCP connections.")
	descConnsHandled  = desc("graphite_connections_total", "TCP connections accepted.")
	descAcceptPaused  = desc("graphite_accept_paused_total", "Times the TCP listener stopped accepting because max-connections were open; new connections waited in the kernel's accept queue.")
	descConnsDropped  = desc("graphite_connections_dropped_total", "TCP connections closed because their partial line did not fit in max-held-bytes.")
	descIdleTimeouts  = desc("graphite_idle_timeouts_total", "TCP connections closed after idle-timeout without data.")
	descBytes         = desc("graphite_bytes_received_total", "Bytes received.")
	descDatagrams     = desc("graphite_datagrams_received_total", "UDP datagrams received.")
	descReadErrors    = desc("graphite_read_errors_total", "Socket read errors.")
	descLines         = desc("lines_received_total", "Non-blank lines received; equals points_encoded_total plus all lines_dropped_total.")
	descCached        = desc("series_cached", "Series (Graphite paths) whose mapping is remembered, about; see max-cached-series.")
	descPoints        = desc("points_encoded_total", "Lines that became points and were queued for InfluxDB.")
	descDropped       = desc("lines_dropped_total", "Lines dropped, by reason.", "reason")
	descWritten       = desc("influxdb_points_written_total", "Points InfluxDB accepted.")
	descBatches       = desc("influxdb_batches_written_total", "Write requests InfluxDB accepted.")
	descRejected      = desc("influxdb_points_rejected_total", "Points InfluxDB refused, by reason.", "reason")
	descWriteErrors   = desc("influxdb_write_errors_total", "Failed write requests, by kind.", "kind")
	descRetries       = desc("influxdb_write_retries_total", "Write requests retried.")
	descQueuedBytes   = desc("influxdb_queue_bytes", "Bytes of encoded points waiting to be written, in memory.")
	descQueueLimit    = desc("influxdb_queue_limit_bytes", "The bound on influxdb_queue_bytes (max-queue-bytes): when it is reached, TCP readers wait and UDP lines are dropped (queue_full), or batches move to the disk queue under state-dir.")
	descQueuedBatches = desc("influxdb_queue_batches", "Batches waiting to be written.")
	descQueueAge      = desc("influxdb_queue_oldest_age_seconds", "Age of the oldest batch waiting to be written, in memory or on disk.")
	descDiskBytes     = desc("influxdb_disk_queue_bytes", "Bytes waiting in the disk queue under state-dir.")
	descDiskLimit     = desc("influxdb_disk_queue_limit_bytes", "The bound on influxdb_disk_queue_bytes (max-disk-queue-bytes): past it the oldest points are dropped (influxdb_points_rejected_total reason \"disk queue full\"). Only with state-dir.")
	descDiskSpilled   = desc("influxdb_disk_spilled_batches_total", "Batches moved to the disk queue because the memory queue was full.")
	descDiskDamaged   = desc("influxdb_disk_queue_damaged_total", "Damaged records skipped in the disk queue (with the rest of their segment file when no sound record follows).")
	descPeakBacklog   = desc("influxdb_backlog_peak_bytes", "Largest backlog so far, memory plus disk.")

	descDeltaSeries  = prometheus.NewDesc("sparkpulse_delta_series", "Cumulative series whose baseline is tracked.", nil, nil)
	descDeltaOutcome = prometheus.NewDesc("sparkpulse_delta_samples_total", "Samples of cumulative series that got no plain delta, by outcome: reset (a restart from zero: delta = value), first_new (baseline zero), first_unknown (no delta), out_of_order (no delta), refused (max-series reached: no delta), refused_app_quota (max-series-per-app reached for its application: no delta).", []string{"outcome"}, nil)
	descDeltaEvicted = prometheus.NewDesc("sparkpulse_delta_series_evicted_total", "Series removed after idle-ttl without samples.", nil, nil)

	descAnnRequests          = prometheus.NewDesc("sparkpulse_annotate_requests_total", "Requests made to Spark REST sources.", nil, nil)
	descAnnBytes             = prometheus.NewDesc("sparkpulse_annotate_response_bytes_total", "Bytes read from Spark REST sources.", nil, nil)
	descAnnPolls             = prometheus.NewDesc("sparkpulse_annotate_polls_total", "Polls of a Spark REST source.", nil, nil)
	descAnnPoints            = prometheus.NewDesc("sparkpulse_annotate_points_total", "Annotation points written (new or changed applications, jobs, stages, SQL executions).", nil, nil)
	descAnnErrors            = prometheus.NewDesc("sparkpulse_annotate_errors_total", "Failed polls, by source (as configured) and kind: network, http_status, decode, wrong_app (an answer about another application).", []string{"source", "kind"}, nil)
	descAnnTracked           = prometheus.NewDesc("sparkpulse_annotate_attempts_tracked", "Application attempts being followed.", nil, nil)
	descAnnLost              = prometheus.NewDesc("sparkpulse_annotate_attempts_lost", "Application attempts their source no longer shows, waiting for another source.", nil, nil)
	descAnnClosedOut         = prometheus.NewDesc("sparkpulse_annotate_closed_out_total", "Lost attempts whose running items were written as UNKNOWN.", nil, nil)
	descAnnInvalid           = prometheus.NewDesc("sparkpulse_annotate_invalid_total", "Values a Spark REST source answered that were not written: peak metric names not of Spark's form, or more than 40 on one executor or stage; numbers no Spark writes, read as absent.", nil, nil)
	descAnnSecond            = prometheus.NewDesc("sparkpulse_annotate_second_source_total", "Applications a second Spark REST source showed while another answered for them, once per application and source: the first one's answers are written, unless a configured source takes over from an {app_id} template's instance.", nil, nil)
	descAnnCapped            = prometheus.NewDesc("sparkpulse_annotate_capped_total", "What the bounds on one application turned away, by what: executors (past 4096 of one application, not followed), points (past an application's 2000 per poll, written at a later poll).", []string{"what"}, nil)
	descAnnSources           = prometheus.NewDesc("sparkpulse_annotate_sources", "Sources polled: configured URLs plus {app_id} template instances.", nil, nil)
	descAnnDetails           = prometheus.NewDesc("sparkpulse_annotate_stage_details_total", "Stage attempts that ended, by what became of their details (task distribution, straggler, failed tasks): read, short (ran less than stage-details-min-duration, no failed task), budget (stage-details-requests spent that poll); unavailable: of those read, the ones the source had no task summary for.", []string{"outcome"}, nil)
	descAnnStreamOnly        = prometheus.NewDesc("sparkpulse_annotate_stream_only_total", "Applications the metrics named that no Spark REST source showed, by outcome: written (their facts, fact stream, from what their metrics say, once quiet for close-out-after), not_kept (4096 were waiting: not followed).", []string{"outcome"}, nil)
	descAnnJournalDamaged    = prometheus.NewDesc("sparkpulse_annotate_journal_damaged_total", "Records of the facts journal that failed their checksum at a start, skipped.", nil, nil)
	descAnnStreamOnlyWaiting = prometheus.NewDesc("sparkpulse_annotate_stream_only_waiting", "Applications the metrics name that no Spark REST source has shown yet.", nil, nil)
	descAnnRefused           = prometheus.NewDesc("sparkpulse_annotate_apps_refused_total", "Application ids from the metrics not used to fill {app_id}, by reason: shape (not a Spark application id), host_label (not a valid DNS label there), rate (more than new-apps-per-poll), cap (max-apps polled), retired (no source knew it, less than 10 min ago).", []string{"reason"}, nil)
)

// descBuildInfo follows Prometheus's convention for a build's identity:
// a constant 1 whose labels say which build this is.
var descBuildInfo = prometheus.NewDesc("sparkpulse_build_info",
	"A constant 1, labelled with the version, the source revision and the Go version sparkpulse was built from.",
	[]string{"version", "revision", "goversion"}, nil)

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.p
	gauge(ch, descBuildInfo, 1, versionString(), revisionString(), runtime.Version())
	if p.deltas != nil {
		collectDeltas(ch, p.deltas)
	}
	q := p.plan.Influx.Queue.WithDefaults() // every writer's bounds
	if p.plan.StateDir == "" {
		q.MaxDiskBytes = 0 // no disk queue
	}
	if p.annotator != nil {
		collectAnnotate(ch, p.annotator, p.plan.Annotate.Poller.Sources)
		collectWriter(ch, "annotate", p.annWriter, q)
	}
	if p.intWriter != nil {
		collectWriter(ch, "internal", p.intWriter, q)
	}
	for _, b := range p.blocks {
		collectBlock(ch, b)
		collectWriter(ch, b.Name(), b.writer, q)
	}
}

func collectDeltas(ch chan<- prometheus.Metric, d *deltaState) {
	st := d.tracker.Stats()
	gauge(ch, descDeltaSeries, float64(d.tracker.Len()))
	counter(ch, descDeltaEvicted, st.Evicted.Load())
	for outcome, v := range map[string]uint64{
		"reset": st.Resets.Load(), "first_new": st.FirstNew.Load(), "first_unknown": st.FirstUnknown.Load(),
		"out_of_order": st.OutOfOrder.Load(), "refused": st.Refused.Load(), "refused_app_quota": st.RefusedQuota.Load(),
		"future": st.Future.Load(), "not_counter": st.NotCounter.Load(), "rebased": st.Rebased.Load(),
	} {
		counter(ch, descDeltaOutcome, v, outcome)
	}
}

// collectAnnotate exports the poller's counters; sources are the
// configured URLs and templates, the names its errors are counted under.
func collectAnnotate(ch chan<- prometheus.Metric, a *annotate.Poller, sources []string) {
	sources = slices.Compact(slices.Sorted(slices.Values(sources))) // a URL listed twice is one series
	st := a.Stats()
	counter(ch, descAnnRequests, st.Requests)
	counter(ch, descAnnBytes, st.Bytes)
	counter(ch, descAnnPolls, st.Polls)
	counter(ch, descAnnPoints, st.Points)
	counter(ch, descAnnClosedOut, st.ClosedOut)
	counter(ch, descAnnJournalDamaged, st.JournalDamaged)
	counter(ch, descAnnInvalid, st.Invalid)
	for _, src := range sources {
		labelled(ch, descAnnErrors, annotate.ErrorKinds, st.Errors[src], src)
	}
	for src, kinds := range st.Errors {
		if !slices.Contains(sources, src) {
			labelled(ch, descAnnErrors, nil, kinds, src)
		}
	}
	gauge(ch, descAnnTracked, float64(st.Tracked))
	gauge(ch, descAnnLost, float64(st.Lost))
	gauge(ch, descAnnSources, float64(st.Sources))
	labelled(ch, descAnnRefused, annotate.RefusedReasons, st.Refused)
	labelled(ch, descAnnDetails, nil, st.StageDetails) // Stats has every outcome
	counter(ch, descAnnSecond, st.SecondSource)
	labelled(ch, descAnnCapped, nil, st.Capped) // likewise
	labelled(ch, descAnnStreamOnly, nil, st.StreamOnly)
	gauge(ch, descAnnStreamOnlyWaiting, float64(st.StreamOnlyWaiting))
}

// collectBlock exports a block's listener and relay counters.
func collectBlock(ch chan<- prometheus.Metric, b *block) {
	name := b.Name()
	g := b.srv.Stats()
	if b.Config.Protocol == "tcp" {
		gauge(ch, descConnsActive, float64(g.ConnsActive.Load()), name)
		counter(ch, descConnsHandled, g.ConnsHandled.Load(), name)
		counter(ch, descAcceptPaused, g.AcceptPaused.Load(), name)
		counter(ch, descConnsDropped, g.ConnsDropped.Load(), name)
		counter(ch, descIdleTimeouts, g.IdleTimeouts.Load(), name)
	} else {
		counter(ch, descDatagrams, g.Datagrams.Load(), name)
	}
	counter(ch, descBytes, g.Bytes.Load(), name)
	counter(ch, descReadErrors, g.ReadErrors.Load(), name)

	// Lines over max-line-length and cut lines never reach the relay;
	// they count as received and dropped, so received = encoded +
	// dropped holds.
	r := b.relay.Stats()
	counter(ch, descLines, r.Lines.Load()+g.LinesTooLong.Load()+g.LinesCut.Load(), name)
	counter(ch, descPoints, r.Points.Load(), name)
	gauge(ch, descCached, float64(b.relay.CachedSeries()), name)
	counter(ch, descDropped, g.LinesTooLong.Load(), name, "too_long")
	if b.Config.Protocol == "tcp" {
		counter(ch, descDropped, g.LinesCut.Load(), name, "cut")
	}
	for i := range relay.NumReasons {
		if i != 0 {
			counter(ch, descDropped, r.Dropped[i].Load(), name, i.String())
		}
	}
}

// collectWriter exports a writer's counters under the listener label name,
// and the bounds q of its queues (MaxDiskBytes 0: no disk queue).
func collectWriter(ch chan<- prometheus.Metric, name string, wr *influx.Writer, q queue.Config) {
	w := wr.Stats()
	counter(ch, descWritten, w.PointsWritten, name)
	counter(ch, descBatches, w.BatchesWritten, name)
	labelled(ch, descRejected, influx.DropReasons, w.PointsDropped, name)
	labelled(ch, descWriteErrors, influx.WriteErrorKinds, w.WriteErrors, name)
	counter(ch, descRetries, w.Retries, name)
	gauge(ch, descQueuedBytes, float64(w.QueuedBytes), name)
	gauge(ch, descQueueLimit, float64(q.MaxBytes), name)
	gauge(ch, descQueuedBatches, float64(w.QueuedBatches), name)
	gauge(ch, descQueueAge, w.OldestQueuedAge.Seconds(), name)
	gauge(ch, descDiskBytes, float64(w.DiskBytes), name)
	if q.MaxDiskBytes > 0 {
		gauge(ch, descDiskLimit, float64(q.MaxDiskBytes), name)
	}
	counter(ch, descDiskSpilled, w.DiskSpilled, name)
	counter(ch, descDiskDamaged, w.DiskDamaged, name)
	gauge(ch, descPeakBacklog, float64(w.PeakBacklog), name)
}

// labelled exports a counter labelled by the keys of got, preceded by
// labels: every value of known (0 when got lacks it), then any other key
// of got, so that nothing counted is hidden.
func labelled(ch chan<- prometheus.Metric, d *prometheus.Desc, known []string, got map[string]uint64, labels ...string) {
	for _, k := range known {
		counter(ch, d, got[k], append(labels, k)...)
	}
	for k, n := range got {
		if !slices.Contains(known, k) {
			counter(ch, d, n, append(labels, k)...)
		}
	}
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}
