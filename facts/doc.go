// Package facts writes each annotation fact exactly once: the ledger of
// facts written, its journal, its checkpoint, and the recovery at start.
// Package annotate encodes the facts; this package decides nothing about
// what they hold.
//
// # The contract
//
// A fact, a point at a measurement, series (the application's tags) and
// time, is written once and never again: not by two sources that show
// one application, not after a restart, not after a crash. InfluxDB 3
// does not reliably keep the later of two points at one series and time,
// so a second write with other values could win. The ledger ([Store])
// keeps, per application id, which facts ([Key]: measurement and time)
// were written; the encoder asks [Store.Has] before it makes one and
// hands the batch to [Store.Write]. The ledger is per application, not
// per source: whichever source's answers make a fact, it is made once,
// as long as the caller makes and writes one application's facts one
// batch at a time (annotate's emit lock). An executor's snapshot is not
// a fact: it is written again when it changed, each at a time after the
// last one's ([Snapshot]), so no two share a time either.
//
// [Store.Forget] drops an application not checked for as long as the
// caller says no source lists it any more; its facts are then not kept.
//
// # When it is journalled
//
// [Store.Write] appends the batch's record (its facts, snapshots and
// points, and its history points where a History sink is configured) to
// the journal and syncs it to disk, then hands the points to the sink
// (the history points to the History sink), then records the facts in
// the ledger, holding the journal
// from the append to the record: a checkpoint never comes between.
// A checkpoint ([Store.Checkpoint]) saves the ledger atomically through
// Durability.Save (with InDir, statefile.Replace: a temporary file,
// synced, renamed) and only then empties the journal. [Store.Checkpoints] tries one each
// interval once a minute has passed, when the sink holds nothing (every
// point journalled was delivered or refused); at a clean stop the caller
// closes the sink first (what it held is delivered or in its disk queue)
// and forces one. At start, [Store.Load] reads the checkpoint and
// [Store.Recover] the journal's records into the ledger, so that no fact
// is made again; [Store.Resend], beside ingest and polling, asks InfluxDB
// (Durability.Stored) which of the journal's points it holds, once more
// a second later for those it seemed not to, and hands the others to the
// sink again. No checkpoint empties the journal before Resend is done.
// Resend's waits end with its caller's context.
//
// # What a crash costs
//
//   - During an append: the record is cut short (no newline) and was
//     never handed on; Recover cuts it off, and its facts are made again
//     from Spark. Nothing lost, nothing written twice.
//   - After the append, before InfluxDB has the points (in the sink, in
//     flight): Recover puts the facts in the ledger, so none is made again
//     with other values, and Resend sends the points InfluxDB does not
//     hold. Nothing lost. A point InfluxDB took after both looks, or all
//     of a record's where InfluxDB does not answer (five tries over a
//     second; after three such records in a row the rest are not asked
//     for), is written twice with the same values, which InfluxDB 3
//     tolerates (it is different values that it may not keep in order).
//   - After delivery, before the checkpoint: as above; InfluxDB holds the
//     points, and none is sent again where it answers.
//   - During a checkpoint: the old checkpoint or the new one is whole, and
//     the journal is emptied only after the new one is: at worst the new
//     checkpoint and the whole journal are read, as above.
//   - During Resend: the journal is as it was; the next start sends again.
//
// What it costs otherwise: an append that fails (a full disk) is cut back
// to the last whole record and logged, and the batch is handed on all
// the same: a crash before the next checkpoint may write its facts again,
// with the values Spark then gives. A whole record damaged on disk fails
// its checksum and is skipped, counted ([Store.Damaged]), the records
// after it kept: its facts may be written again, its points are not sent
// again. A checkpoint that cannot be read is refused whole by Load: the
// caller starts without it, and facts of applications still listed are
// written again.
//
// # On disk
//
// The journal (state-dir/annotate.journal) is a line per record: its
// version, 2, a space, the CRC-32C (statefile.Checksum, as in every state
// file) of the JSON that follows as eight lower-case hex digits, a space,
// the JSON, a newline:
//
//	2 e47fdecf {"a":"app-1","f":[{"m":0,"t":1700000000000000000}],"n":1,"l":"spark_app,applicationid=app-1 status=\"RUNNING\" 1700000000000000000\n"}
//
// a: the application id; f: its facts, m the measurement's index (below)
// and t the time in ns, omitted when none; x: executor snapshots by
// process, s the fingerprint of the point's tags and fields and t its
// time, omitted when none; n: the points in l, line protocol, a point per
// line; hn and h likewise the history points, omitted when none (Resend
// asks Durability.StoredHistory for them, and hands them to the History
// sink). A line of version 1, an older sparkpulse's, has no version and
// the CRC-32 (IEEE) of its JSON; it is read still.
//
// The checkpoint (state-dir/annotate.state; the caller names both files)
// is the CRC-32C of what follows as eight hex digits, a space, then one
// JSON object and a newline, version 2:
//
//	10c83da6 {"version":2,"applications":{"app-2":{"used":1700000000500,"facts":[{"m":1,"t":4}],"executors":{"1":{"s":1,"t":2}}}}}
//
// used: the application's last check, unix ms; facts sorted by m, then t.
// Version 1, an older sparkpulse's, is the JSON alone ("version":1), and
// is read still; Load refuses a damaged file and any other version.
//
// A measurement's index is its place in this list, only ever appended to: spark_app 0, spark_job 1, spark_stage
// 2, spark_sql 3, spark_executor 4, spark_executor_removal 5,
// spark_sizing 6, spark_task_failure 7, spark_stage_progress 8,
// spark_app_usage 9, spark_reconcile 10.
package facts
