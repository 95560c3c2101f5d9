// Package graphite reads the Graphite plaintext protocol as InfluxDB 1.x's
// graphite service does, for senders such as Spark's Dropwizard GraphiteSink.
//
// # Lines
//
// [Parse] splits one line into path, value and timestamp with exactly the
// rules of InfluxDB 1.x (services/graphite/parser.go): tokens are separated
// by runs of Unicode white space, there must be 2 or 3 of them, the value and
// the timestamp follow strconv.ParseFloat, NaN and ±Inf values are refused,
// a missing timestamp or -1 means "now", and timestamps are seconds in
// [1901-12-13, 2038-01-19]. Parse never allocates, whatever the line; a
// rejected line gets a [Reason], and [Explain] turns it into the error text
// InfluxDB would have logged.
//
// # Listeners
//
// [ListenTCP] and [ListenUDP] cut the byte stream into lines and hand them
// to a [ConnHandler], one per TCP connection or UDP reader, which is only
// ever called from one goroutine. Lines reach the handler without their
// terminator and without surrounding white space; blank lines never do.
// Flush marks the end of a block so the handler can pass on what it has
// buffered, and Close, which always follows a last Flush, ends the stream.
// TCP flushes after every read that completed a line. UDP, where Spark
// sends a datagram per line, has one reader goroutine that flushes every
// 1024 lines, after 100 ms without a datagram, and at the latest 1 s after
// the oldest pending line arrived.
//
// A TCP connection's last line without its final '\n' is not handed on,
// as InfluxDB does not, but counted in Stats.LinesCut: Dropwizard ends
// every line and flushes before it closes, so such a line was cut when
// its sender died mid-report (real Spark executors killed or out of heap
// do this), and what is left of it may parse as a smaller value or an
// earlier time.
//
// Where InfluxDB and this package differ on purpose:
//   - lines longer than MaxLineLength are dropped and counted, idle TCP
//     connections are closed, and the number of connections can be capped
//     (InfluxDB has no limits);
//   - over UDP, whitespace-only pieces of a datagram are skipped like over
//     TCP (InfluxDB counts them as parse failures).
package graphite
