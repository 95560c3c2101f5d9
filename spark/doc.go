// Package spark is sparkpulse's built-in mapping of the Graphite paths that
// Apache Spark's GraphiteSink sends to InfluxDB measurements and tags. It is
// used by every [[graphite]] block that configures no `templates`.
//
// # Contract
//
// This is the CERN shape (Options.Schema SchemaCERN); the wide shape is
// described at the end. The field is always "value". Measurement names keep their dots. Tag values
// and measurements are contiguous runs of the path (dots included), except
// the six pools.* measurements below. NS is spark.metrics.namespace (the app
// id by default, or e.g. the app name), EXECID is "driver" or an executor id
// (all digits), P is an optional GraphiteSink prefix.
//
//	path shape                                     measurement        tags
//	---------------------------------------------  -----------------  ------------------------------------------
//	[P.]NS.EXECID.SRC.METRIC                       METRIC             applicationid=NS process=EXECID
//	                                                                  namespace=SRC [username=P]
//	[P.]NS.EXECID.plugin.CLASS.METRIC              CLASS.METRIC       ... namespace=plugin
//	[P.]NS.EXECID.jvm.pools.POOL.ATTR              pools.ATTR         ... namespace=jvm pool=POOL
//	[P.]NS.EXECID.spark.streaming.QUERY.METRIC     METRIC             ... namespace=spark.streaming id=QUERY
//	[P.]NS.EXECID.APPNAME.StreamingMetrics.streaming.METRIC
//	                                               streaming.METRIC   ... namespace=StreamingMetrics id=APPNAME
//	[P.]NS.applicationMaster.METRIC                METRIC             applicationid=NS namespace=applicationMaster
//	                                                                  [username=P]
//	[P.]application.APPNAME.STARTMILLIS.METRIC     METRIC             namespace=application appname=APPNAME
//	                                                                  appstart=STARTMILLIS [username=P]
//	[P.]DAEMON.METRIC                              METRIC             namespace=DAEMON [username=P]
//	[P.]jvm.pools.POOL.ATTR                        pools.ATTR         namespace=jvm pool=POOL [username=P]
//	anything else                                  the whole path     (none)
//
// SRC is one of executor, ExecutorMetrics, JVMCPU, NettyBlockTransfer,
// ExternalShuffle, DAGScheduler, BlockManager, LiveListenerBus, appStatus,
// ExecutorAllocationManager, CodeGenerator, HiveExternalCatalog, jvm,
// AccumulatorSource. DAEMON is master, worker, shuffleService, jvm,
// CodeGenerator or HiveExternalCatalog (the instances without NS and
// EXECID). ATTR is init, used, max, committed, usage or used-after-gc; for
// any other attribute the measurement is pools.POOL.ATTR and there is no
// pool tag. STARTMILLIS has 13 digits. METRIC, CLASS, QUERY, POOL, APPNAME,
// NS and P may contain dots; QUERY is everything up to the last part.
// Global tags of the block are added to every point unless the mapping
// produced the same key.
//
// For example
//
//	application_1717000000000_0042.3.executor.cpuTime.count
//	  -> cpuTime.count applicationid=application_1717000000000_0042,namespace=executor,process=3
//	lucatest.app-20240101120000-0001.driver.jvm.pools.G1-Eden-Space.used
//	  -> pools.used applicationid=app-20240101120000-0001,namespace=jvm,pool=G1-Eden-Space,process=driver,username=lucatest
//
// This matches the schema of the CERN Spark dashboard (cerndb/spark-dashboard,
// its default template username.applicationid.process.namespace.measurement*),
// so its InfluxQL dashboards work unchanged, with three deliberate
// differences: JVM memory pools share one measurement per attribute with a
// pool tag, DStreams metrics get namespace=StreamingMetrics and the app name
// in id, and daemon metrics (master, worker, applications) are tagged
// instead of landing under the whole path. Unlike those templates, the
// prefix is optional.
//
// # Finding the prefix and the namespace
//
// EXECID is the earliest part, other than the first, that is "driver" or
// all digits and is followed by a known source with at least one metric
// part.
// Everything before it is [P.]NS, and the split between P and NS is
// ambiguous because both may contain dots. Options.Prefixes resolves it: a
// path that starts with a configured prefix and a dot has it stripped into
// username, and the rest before EXECID is NS. Without a configured match,
// the part right before EXECID is taken as NS when it looks like a Spark
// app id (local-…, app-…, application_…, spark-<32 hex>,
// spark-application-…) and whatever precedes it becomes username; otherwise
// (a custom spark.metrics.namespace such as the app name) all of it is NS
// and there is no username. So a GraphiteSink prefix combined with a custom
// namespace must be listed in Options.Prefixes, or it ends up inside
// applicationid. The same rule splits [P.]NS before applicationMaster. For
// applications and daemons, everything before the application or DAEMON part
// is the prefix. The shapes are tried in the order of the table, so a daemon
// word inside a prefix does not hide the driver/executor form.
//
// # The wide shape
//
// With Options.Schema SchemaWide, a path of the table above maps to the
// same tags but namespace, with the source as the measurement and the
// metric as the field: SRC (or "plugin.CLASS", "spark.streaming",
// "StreamingMetrics", "applicationMaster", "application", DAEMON) is the
// measurement and METRIC the field, e.g.
//
//	application_1717000000000_0042.3.executor.cpuTime.count
//	  -> executor applicationid=application_1717000000000_0042,process=3 field cpuTime.count
//
// CLASS is the plugin's part up to its first part that starts with an
// upper-case letter (a Java class name), or all but the last part. The
// JVM's memory pools are fields (pools.POOL.ATTR, no pool tag): a small
// set the garbage collector fixes, so that a process's JVM is one series.
// The LiveListenerBus's listenerProcessingTime.LISTENER.STAT and
// queue.QUEUE.METRIC, whose listeners and queues an application adds,
// become the fields listenerProcessingTime.STAT and queue.METRIC with the
// tags listener and queue, for the timer statistics and queue metrics
// Spark has. A path of no documented form maps as in the CERN shape. The relay
// writes the lines of one report of one process and source, which share a
// series and a time, as one point.
package spark
