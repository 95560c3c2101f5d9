// Package influx delivers encoded line protocol to InfluxDB 1.8+, 2.x and 3.x
// through the v2 write API (/api/v2/write; on 1.x the bucket is "db/rp" or
// "db"), checks a target at start-up, and runs InfluxQL queries.
//
// A [Writer] has three stages. Its batcher ([Writer.AppendLines]) copies
// blocks of complete, already encoded lines, with where each line and its
// series key end ([queue.Lines], recorded by the encoder), into batches of
// Config.BatchSize points (a partial batch is sealed Config.BatchTimeout
// after its first point); batches are cut, refused lines picked out and
// refused series recognised by those spans, never by reading line
// protocol again (a refused point of several fields is decoded once, by
// line-protocol's decoder, to be resent a field a point). The sealed
// batches wait in a [queue.Queue], in memory and, with Config.Queue.Dir,
// on disk; Config.MaxInFlight senders take them, POST them and give them
// back done. Nothing on the write path reads from InfluxDB. Requests go through influxdb-client-go's HTTP
// service (token, user agent, TLS, timeout), whose raw answer gives the
// status and body that decide what a failure means.
//
// The contract:
//
//   - AppendLines (and Append, for producers that keep no line ends: the
//     annotator's and the self-metrics' few points) copies its input and
//     returns; when the queue is full it waits
//     for room (a slow or absent InfluxDB slows a TCP reader down instead
//     of growing memory), or, for a reader that cannot wait, returns false
//     and keeps nothing.
//   - What an answer means is decided by answerRules (answers.go), one rule
//     per kind of answer of InfluxDB 1.8, 2.x, 3.x and Cloud, each quoted in
//     testdata/write-answers.json. Network errors, 5xx, 429, InfluxDB 3's
//     400 for server trouble (a full WAL, the object store) and refusals of
//     the request itself (401, 403, 404, a database limit) are retried with
//     exponential backoff (1 s doubling to Config.MaxRetryBackoff, with
//     jitter; a Retry-After is honoured) until Close gives up. Nothing is
//     ever dropped for being retried too long.
//   - A partial write (InfluxDB stored the valid points of a batch and says
//     how many it dropped) is counted by reason and not resent.
//   - A batch refused over lines the answer names (InfluxDB 3.0–3.4.1,
//     Cloud) is resent without them; one refused over a line it does not
//     name (2.x, 3.4.2+, 413) is split in halves and each half resent, down
//     to single lines. Only refused lines are lost; they are counted and
//     logged at most a few times per second. A 413 for a request of
//     64 KiB or less is retried as a 5xx is: no server's limit is that
//     low, so the server, or a proxy before it, refuses every request for
//     now, and its points are kept.
//   - InfluxDB 1.x's max-series-per-database and max-values-per-tag store
//     none of a batch with a point of a new series: the batch is halved
//     until the others are stored, and the refused series are remembered
//     for a while and their later points refused without a request
//     (newseries.go).
//   - Close sends the partial batch and waits until the queue is empty; when
//     its context ends first, it cancels what is in flight and reports how
//     many points were not delivered. With a disk queue, a write that fails
//     once Close has begun is not retried: what is left is kept on disk for
//     the next start.
//   - A batch's memory is reused for a later batch only once the HTTP
//     transport has closed every request body made of it.
//   - The token is sent as "Authorization: Token <token>" and never appears
//     in a log entry or an error.
//
// [Check] verifies at start-up that the database (1.x, optionally created)
// or bucket (2.x) exists. It returns an error wrapping [ErrUnreachable] when
// InfluxDB cannot be reached, so a caller can start anyway and let the
// Writer deliver once InfluxDB is up. A [Querier] runs InfluxQL
// statements over one HTTP client.
package influx
