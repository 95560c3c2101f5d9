package relay

import (
	"cmp"
	"slices"

	"github.com/sparkpulse/sparkpulse/queue"
)

// Spark's reporter sends a report in groups — gauges, counters,
// histograms, meters, timers, each in name order — so the lines of one
// process and source come in up to five runs, and the encoder, which
// joins a run into one point, makes a point per run. With JoinReports,
// the points of a block that share a series and a time are joined when
// the block is handed on: the first takes the others' fields, in order,
// unless two of them hold the same series (a repeated line: InfluxDB
// would keep one of its values, and InfluxDB 3 may refuse the point) or
// the joined point would hold more than maxPointFields fields.

// blockPoint is a point of the block being encoded.
type blockPoint struct {
	key        string // its series key
	ts         int64
	start      int32 // where its line starts in the block
	fields     int32 // where its fields start
	fieldsEnd  int32 // where they end: its time follows
	firstField int32 // its first field's series, in Conn.fseries
}

// joinScratch is the memory joined reuses from block to block.
type joinScratch struct {
	ends    []int32
	keys    []int32
	done    []bool
	members []int
	series  []*series
}

// joinWindow bounds how many earlier points a new point is compared
// with: a report's points of one source are a few dozen apart at most.
const joinWindow = 64

// notePoint records a new point of the block, at offset start, its
// fields fieldsAt bytes after it, and whether an earlier one has its
// series and time.
func (c *Conn) notePoint(key string, ts int64, start, fieldsAt int) {
	for i := len(c.pts) - 1; i >= max(0, len(c.pts)-joinWindow) && !c.rejoin; i-- {
		if p := &c.pts[i]; p.ts == ts && len(p.key) == len(key) && p.key == key {
			c.rejoin = true
		}
	}
	c.pts = append(c.pts, blockPoint{key: key, ts: ts, start: int32(start), fields: int32(start + fieldsAt),
		firstField: int32(len(c.fseries))})
}

// noteField records a field of the block's last point, whose fields now
// end at end.
func (c *Conn) noteField(s *series, end int) {
	c.fseries = append(c.fseries, s)
	c.pts[len(c.pts)-1].fieldsEnd = int32(end)
}

// forgetPoints empties the record of the block's points.
func (c *Conn) forgetPoints() {
	c.pts, c.fseries, c.rejoin = c.pts[:0], c.fseries[:0], false
}

// fieldCount is the number of fields point i holds.
func (c *Conn) fieldCount(i int) int {
	end := len(c.fseries)
	if i+1 < len(c.pts) {
		end = int(c.pts[i+1].firstField)
	}
	return end - int(c.pts[i].firstField)
}

// joined is the block with the points of one series and time joined, in
// a block buffer of the relay's that the caller releases.
func (c *Conn) joined() queue.Lines {
	j := &c.join
	out, ends, keys := c.relay.block(), j.ends[:0], j.keys[:0]
	j.done = slices.Grow(j.done[:0], len(c.pts))[:len(c.pts)]
	clear(j.done)
	for i := range c.pts {
		if j.done[i] {
			continue
		}
		p := c.pts[i]
		members, fields := append(j.members[:0], i), c.fieldCount(i)
		for k := i + 1; k < len(c.pts); k++ {
			if q := &c.pts[k]; !j.done[k] && q.ts == p.ts && q.key == p.key && fields+c.fieldCount(k) <= maxPointFields {
				members, fields = append(members, k), fields+c.fieldCount(k)
			}
		}
		if len(members) > 1 && c.repeats(members) {
			members = members[:1]
		}
		keys = append(keys, int32(len(out))+p.fields-1-p.start) // the space before its fields
		out = append(out, c.out[p.start:p.fieldsEnd]...)
		for _, k := range members[1:] {
			out = append(append(out, ','), c.out[c.pts[k].fields:c.pts[k].fieldsEnd]...)
			j.done[k] = true
		}
		out = append(out, c.out[p.fieldsEnd:c.ends[i]]...)
		ends = append(ends, int32(len(out)))
		j.members = members
	}
	j.ends, j.keys = ends, keys
	return queue.Lines{Data: out, Ends: ends, Keys: keys}
}

// repeats reports whether a series has a field in two of the points.
func (c *Conn) repeats(points []int) bool {
	j := &c.join
	all := j.series[:0]
	for _, i := range points {
		first := int(c.pts[i].firstField)
		all = append(all, c.fseries[first:first+c.fieldCount(i)]...)
	}
	j.series = all
	slices.SortFunc(all, func(a, b *series) int {
		return cmp.Or(cmp.Compare(a.key[0], b.key[0]), cmp.Compare(a.key[1], b.key[1]))
	})
	for k := 1; k < len(all); k++ {
		if all[k] == all[k-1] {
			return true
		}
	}
	return false
}
