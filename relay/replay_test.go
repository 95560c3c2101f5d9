package relay

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/ingestlog"
	"github.com/sparkpulse/sparkpulse/queue"
)

// store is InfluxDB as far as deltas go: a point is its series and time,
// and a point written again sets the fields it has, keeping the others.
type store map[string]map[string]float64

func (s store) AppendLines(l queue.Lines, _ bool) bool {
	points, _ := parsePoints(l.Data)
	for _, p := range points {
		key := fmt.Sprint(p.series(), " ", p.time)
		if s[key] == nil {
			s[key] = map[string]float64{}
		}
		for _, f := range p.fields {
			s[key][f.key] = f.value.FloatV()
		}
	}
	return true
}

// writer holds the points handed to it until deliver, like the writer's
// memory: a kill loses what it holds.
type writer struct {
	to   store
	held []queue.Lines
}

func (w *writer) AppendLines(l queue.Lines, _ bool) bool {
	w.held = append(w.held, queue.Lines{Data: bytes.Clone(l.Data)})
	return true
}

func (w *writer) deliver() {
	for _, l := range w.held {
		w.to.AppendLines(l, true)
	}
	w.held = nil
}

// crashRun is one process's relay, baselines and ingest log.
type crashRun struct {
	relay  *Relay
	states *delta.Store
	log    *ingestlog.Log
	writer *writer
}

// checkpoint copies the baselines as the ingest log rotates, waits until
// the writer holds nothing taken before (here: delivers it), then saves
// the copy and drops the log before.
func (r *crashRun) checkpoint(t *testing.T) {
	type saved struct {
		id delta.ID
		st delta.State
	}
	var snap []saved
	seq, err := r.log.Rotate(func() {
		for id, st := range r.relay.States {
			snap = append(snap, saved{id, st})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	r.writer.deliver()
	err = r.states.Save(func(yield func(delta.ID, delta.State) bool) {
		for _, s := range snap {
			if !yield(s.id, s.st) {
				return
			}
		}
	}, seq)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.log.Drop(seq); err != nil {
		t.Fatal(err)
	}
}

// A process killed at any point of a run, started again on its state
// directory, leaves every counter's deltas summing to its exact increase:
// the baselines of the last checkpoint, and the lines logged since,
// handed to the relay again with their receive times, give the same
// points with the same deltas, and what the writer held when it was
// killed is written again.
func TestReplayAfterCrash(t *testing.T) {
	rules, err := delta.CompileRules([]delta.Rule{{Source: "test", Cumulative: true, Path: []string{"**.count"}}})
	if err != nil {
		t.Fatal(err)
	}
	kills, replayed := 0, 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		dir := t.TempDir()
		db := store{}
		t0 := time.Unix(1795300000, 0)
		clock := t0
		start := func() *crashRun {
			tr, st := delta.OpenState(dir, delta.Settings{FirstSampleGrace: delta.NoGrace}, zap.NewNop())
			l, err := ingestlog.Open(filepath.Join(dir, "ingest"), "fp", 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := &crashRun{states: st, log: l, writer: &writer{to: db}}
			r.relay = New(Config{Mapper: mustCompile(t, "measurement*"), Sink: r.writer, Ingest: l,
				Deltas: &Deltas{Rules: rules, Tracker: tr, Bucket: "db"}, Now: func() time.Time { return clock }})
			if st.Loaded() {
				n, err := l.Replay(tr.Mark(), func(_ int, recv int64, lines []byte) { r.relay.Replay(recv, lines) })
				if err != nil {
					t.Fatal(err)
				}
				replayed += n
			}
			r.checkpoint(t)
			return r
		}
		cur := start()
		// Three executors report every 10 s for 60 rounds. The writer
		// delivers now and then; the process checkpoints now and then,
		// and is killed at random.
		value := map[string]float64{}
		for round := range 60 {
			clock = t0.Add(time.Duration(round) * 10 * time.Second)
			for e := range 3 {
				c := cur.relay.NewConn(nil)
				for _, m := range []string{"cpuTime", "runTime"} {
					path := fmt.Sprintf("app-1.%d.%s.count", e, m)
					value[path] += float64(rng.IntN(1000))
					c.Line(fmt.Appendf(nil, "%s %g %d", path, value[path], clock.Unix()))
				}
				c.Close()
				if rng.IntN(3) == 0 {
					cur.writer.deliver()
				}
			}
			switch rng.IntN(6) {
			case 0:
				cur.checkpoint(t)
			case 1:
				cur.log.Close() // killed: the writer's points are lost, nothing saved
				kills++
				cur = start()
			}
		}
		cur.writer.deliver()
		sums := map[string]float64{}
		for key, f := range db {
			series := key[:strings.LastIndexByte(key, ' ')]
			sums[series] += f["delta"]
		}
		for path, want := range value {
			if got := sums[path]; got != want {
				t.Errorf("seed %d: %s: deltas sum to %g, the counter rose by %g", seed, path, got, want)
			}
		}
	}
	t.Logf("%d kills, %d blocks replayed", kills, replayed)
	if kills < 20 || replayed == 0 {
		t.Errorf("%d kills, %d blocks replayed: the test did not kill", kills, replayed)
	}
}
