package accounting

import (
	"time"

	"github.com/sparkpulse/sparkpulse/sparkapi"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func ms(t time.Time) int64 { return t.UnixMilli() }

// stageAt is a stage attempt run from sub to done seconds after t0 (done
// < 0: still running).
func stageAt(id, attempt int, status string, sub, done float64) sparkapi.Stage {
	s := sparkapi.Stage{StageID: id, AttemptID: attempt, Status: status, SubmissionTime: sparkapi.OptDate(at(sub))}
	if done >= 0 {
		s.CompletionTime = sparkapi.OptDate(at(done))
	}
	return s
}
