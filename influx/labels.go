package influx

// Why points were not delivered: the keys of Stats.PointsDropped, and the
// reason label of sparkpulse_influxdb_points_rejected_total.
const (
	DropFieldTypeConflict = "field type conflict"     // a field's type differs from the one stored
	DropSchemaLimit       = "schema limit"            // 3.x: too many columns or tables
	DropUnableToParse     = "unable to parse"         // InfluxDB could not parse the line
	DropInvalidFieldName  = "invalid field name"      // 1.x: a field named "time"
	DropRetention         = "beyond retention policy" // older than the retention period
	DropMaxValuesPerTag   = "max values per tag"      // 1.x max-values-per-tag reached
	DropMaxSeries         = "max series per database" // 1.x max-series-per-database reached
	DropTooLarge          = "too large"               // 413: the request body is over the server's limit
	DropRefused           = "refused"                 // any other refusal
	DropDiskQueueFull     = "disk queue full"         // the disk queue reached its limit
	DropWriterClosed      = "writer closed"           // appended after Close or Refuse
)

// DropReasons lists every key Stats.PointsDropped can have.
var DropReasons = []string{
	DropFieldTypeConflict, DropSchemaLimit, DropUnableToParse, DropInvalidFieldName, DropRetention,
	DropMaxValuesPerTag, DropMaxSeries, DropTooLarge, DropRefused, DropDiskQueueFull, DropWriterClosed,
}

// Kinds of failed write requests: the keys of Stats.WriteErrors, and the
// kind label of sparkpulse_influxdb_write_errors_total.
const (
	ErrNetwork = "network" // no answer: connection refused, reset, timed out
	Err5xx     = "5xx"
	Err429     = "429"
	Err4xx     = "4xx"
)

// WriteErrorKinds lists every key Stats.WriteErrors can have.
var WriteErrorKinds = []string{ErrNetwork, Err5xx, Err429, Err4xx}
