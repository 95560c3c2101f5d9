// Package influx delivers encoded line protocol to InfluxDB 1.8+, 2.x and 3.x
// through the v2 write API (/api/v2/write; on 1.x the bucket is "db/rp" or
// "db").
//
// A [Writer] takes blocks of complete, already encoded lines ([Writer.Append]),
// cuts them into batches of Config.BatchSize points (a partial batch is sealed
// Config.BatchTimeout after its first point), keeps the batches in a queue
// bounded by Config.MaxQueueBytes and sends them with Config.MaxInFlight
// concurrent requests through the influxdb-client-go blocking write API,
// which provides HTTP, authentication, gzip and TLS. The client's own
// asynchronous writer is not used: it drops batches when its retry buffer
// fills and loses them on Close.
//
// The contract:
//
//   - Append copies its input and returns; when the queue is full it blocks
//     until a batch is delivered, so a slow or absent InfluxDB slows the
//     reader down (TCP back-pressure) instead of growing memory.
//   - Network errors, 5xx, 429, 401, 403 and 404 are retried with exponential
//     backoff (1 s doubling to Config.MaxRetryBackoff, with jitter; a
//     Retry-After from the server is honoured) until Close gives up. Nothing
//     is ever dropped for being retried too long.
//   - A partial write (InfluxDB stored the valid points of a batch and says
//     how many it dropped) is counted by reason and not resent.
//   - A batch refused as a whole (400, 413, 422 without "partial write") is
//     split in halves and each half resent, down to single lines, so only the
//     refused lines are lost; they are counted and logged at most a few times
//     per second.
//   - Close sends the partial batch and waits until the queue is empty; when
//     its context ends first, it cancels what is in flight and reports how
//     many points were not delivered.
//   - The token is sent as "Authorization: Token <token>" and never appears
//     in a log entry or an error.
//
// [Check] verifies at start-up that the database (1.x, optionally created)
// or bucket (2.x) exists. It returns an error wrapping [ErrUnreachable] when
// InfluxDB cannot be reached, so a caller can start anyway and let the
// Writer deliver once InfluxDB is up.
package influx
