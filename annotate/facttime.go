package annotate

// Facts are append-only: a series and time is written once and never
// again (package facts keeps the record), because InfluxDB 3 does not
// reliably keep the later of two points at one series and time. An
// item's facts are at its start time, apart in the sub-millisecond digits
// (factTime):
//
//   - start: the item seen running, with what is known when it starts;
//   - end: its final state, written once it has one;
//   - lost: what was last seen of an item still running when its source
//     lost the application (status UNKNOWN), written at the close-out.
//
// An executor's facts are snapshots at the time they were seen, in a series
// of its own (tag process), written when something changed.

// Phases of an item, the last two bits of its facts' times.
const (
	phaseStart = 0
	phaseEnd   = 1
	phaseLost  = 2
	// phaseStream: an application no source showed, as its metrics
	// tell it (unseen.go).
	phaseStream = 3
)

var phaseNames = [...]string{phaseStart: "start", phaseEnd: "end", phaseLost: "lost", phaseStream: "stream"}

// factTime is the time of an item's fact: its start in ms, then the item's
// id (modulo 250 000) and the phase in the sub-millisecond digits.
func factTime(startMs, id int64, phase int) int64 {
	return startMs*1_000_000 + (id%250_000)*4 + int64(phase)
}
