package annotate

import (
	"hash/fnv"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/schema"
)

// history adds the point just ended, an application's final
// spark_app_usage (end, lost or stream), to the batch's spark_app_history
// points, when a History sink is configured: the same tags but
// applicationid, so that its series are per name, queue and user, not
// per application, and the same fields, app_id among them (the metrics'
// key, where a stream fact has no Spark id). Its time is
// the fact's, with the sub-millisecond digits taken from a hash of the
// application's id rather than left at zero: two runs of one name ending
// in the same millisecond are two points, not one.
func (w *points) history() {
	if w.p.cfg.History == nil {
		return
	}
	line := w.enc.Bytes()
	dec := lineprotocol.NewDecoderWithBytes(line)
	var enc lineprotocol.Encoder
	enc.SetPrecision(lineprotocol.Nanosecond)
	for dec.Next() {
		if _, err := dec.Measurement(); err != nil {
			break
		}
		enc.StartLine(schema.MeasurementAppHistory)
		key := ""
		for {
			k, v, err := dec.NextTag()
			if err != nil || k == nil {
				break
			}
			if string(k) == schema.TagApplicationID {
				key = string(v)
			} else {
				enc.AddTag(string(k), string(v))
			}
		}
		withID := false
		for {
			k, v, err := dec.NextField()
			if err != nil || k == nil {
				break
			}
			withID = withID || string(k) == schema.FieldAppID
			enc.AddField(string(k), v)
		}
		if !withID && key != "" {
			// A stream fact of metrics whose key is not a Spark id: the
			// key is all that names the application.
			enc.AddField(schema.FieldAppID, lineprotocol.MustNewValue(key))
		}
		enc.EndLine(time.Unix(0, historyTime(w.ts, w.st.Key.App)))
	}
	if err := dec.Err(); err != nil || enc.Err() != nil {
		w.p.log.Warn("history point not encodable", zap.String("application", w.st.Key.String()), zap.NamedError("decode", dec.Err()), zap.NamedError("encode", enc.Err()))
		return
	}
	w.hist = append(w.hist, enc.Bytes()...)
	w.hn++
}

// historyTime is a usage fact's time ts (milliseconds, then 0 to 3 for
// the fact) with 1 to 249 999 of app's hash in the sub-millisecond
// digits between.
func historyTime(ts int64, app string) int64 {
	h := fnv.New32a()
	h.Write([]byte(app))
	ms, fact := ts-ts%1_000_000, ts%4
	return ms + (int64(h.Sum32()%249_999)+1)*4 + fact
}
