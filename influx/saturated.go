package influx

import (
	"context"
	"fmt"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/queue"
)

// When a tag of a measurement has InfluxDB 1.x's max-values-per-tag values
// (100 000 by default), a batch with a point that would add one more is
// answered "partial write: max-values-per-tag limit exceeded … dropped=1"
// and InfluxDB 1.8 stores none of its points. So the tag's existing values
// are read once (Querier.TagValues, kept a minute) and the batch is sent
// again without the points that would add a value, which are counted as
// refused: points of existing series, genuine data among them, are kept.

// tagValues are the values of a tag at max-values-per-tag, as read.
type tagValues struct {
	read   time.Time
	values map[string]struct{}
}

const tagValuesTTL = time.Minute

// withoutNewValues returns the lines (of b) that add no value to f's
// saturated tag, counting the others as refused.
func (w *Writer) withoutNewValues(b *queue.Batch, lines queue.Lines, f failure) (queue.Lines, error) {
	if f.measurement == "" || f.tag == "" {
		return queue.Lines{}, fmt.Errorf("influx: max-values-per-tag without a measurement and tag: %s", f.text)
	}
	values, err := w.saturatedValues(f.measurement, f.tag)
	if err != nil {
		w.dropLog.Warn("cannot read a saturated tag's values; retrying the batch", zap.String("measurement", f.measurement),
			zap.String("tag", f.tag), zap.Error(err))
		return queue.Lines{}, err
	}
	var kept queue.Lines
	dropped := 0
	for i := range lines.Len() {
		line := lines.Line(i)
		if v, ok := tagOf(line, f.measurement, f.tag); ok {
			if _, exists := values[v]; !exists {
				dropped++
				continue
			}
		}
		kept.Append(line)
	}
	b.Remaining.Add(-int64(dropped))
	w.drop(f.reason, dropped)
	w.dropLog.Warn("InfluxDB's max-values-per-tag is reached: points that would add a value are refused, the others sent again",
		zap.String("measurement", f.measurement), zap.String("tag", f.tag), zap.Int("refused", dropped), zap.Int("kept", kept.Len()))
	return kept, nil
}

// tagOf returns the value of tag in a line of measurement, if it has one.
func tagOf(line []byte, measurement, tag string) (string, bool) {
	dec := lineprotocol.NewDecoderWithBytes(line)
	if !dec.Next() {
		return "", false
	}
	m, err := dec.Measurement()
	if err != nil || string(m) != measurement {
		return "", false
	}
	for {
		k, v, err := dec.NextTag()
		if err != nil || k == nil {
			return "", false
		}
		if string(k) == tag {
			return string(v), true
		}
	}
}

// saturatedValues reads a tag's values, or takes them from the last minute.
func (w *Writer) saturatedValues(measurement, tag string) (map[string]struct{}, error) {
	key := measurement + "\x00" + tag
	w.satMu.Lock()
	defer w.satMu.Unlock()
	if tv, ok := w.saturated[key]; ok && time.Since(tv.read) < tagValuesTTL {
		return tv.values, nil
	}
	db, _, err := splitDBRP(w.target.Bucket)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.RequestTimeout)
	defer cancel()
	values, err := w.reader.TagValues(ctx, db, measurement, tag)
	if err != nil {
		return nil, err
	}
	clear(w.saturated) // one tag at a time is kept
	w.saturated[key] = tagValues{read: time.Now(), values: values}
	return values, nil
}
