package annotate

import (
	"context"
	"net/url"
	"time"

	"github.com/sparkpulse/sparkpulse/attempt"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
	"go.uber.org/zap"
)

// appState is what the poller knows of one application attempt: what
// Spark said of it (attempt.State), and where its sync, hand-over and
// accounting stand.
type appState struct {
	attempt.State
	// YARN's word on where the application ran and for whom, read once
	// from the ResourceManager whose proxy serves its UI (source.rm).
	rm                  string
	yarnRead            bool
	yarnQueue, yarnUser string
	// YARN's own accounting of the application, read once after its end
	// (usage.go): nil until then, or when it could not be read.
	yarnHeld *sparkapi.YARNApplication
	syncedAt int64 // lastUpdated as of the last sync

	synced   bool // read in full at least once from the current source
	final    bool // written in its completed state
	lastSeen time.Time
	lostAt   time.Time
	// goneWhy says why it was closed out as lost while a History Server
	// showed it running (gone.go).
	goneWhy string
	// syncing is closed when a sync started by a configured source's poll
	// ends, and syncErr is then its outcome; nil when no sync runs. Only
	// the goroutine polling the source reads them, and touches nothing
	// else of the state while it is open (pollSource).
	syncing chan struct{}
	syncErr error

	namesakes []string // other applications of the source, of the same name, running at the same time
	tag       string   // the applicationid of its points, once decided (tagKey)
	// Accounting (usage.go).
	endRead      bool                     // read in full since it completed
	accounted    bool                     // the stream was read (or given up on) after the end
	streamTries  int                      // failed reads of the stream
	invalid      int                      // values of its answers no Spark writes, read as absent (sparkapi.Check)
	invalidSeen  []string                 // the first few of them
	streamFailed time.Time                // the first failed read
	streamNext   time.Time                // no read before
	estimate     *usageRead               // a running estimate's read: written, then cleared
	estimatedAt  time.Time                // when the last estimate was read
	acc          map[string]ProcessTotals // the running estimates' stream up to accTo, read once (estimateStream)
	accTo        time.Time
}

func newAppState(key attempt.Key) *appState {
	return &appState{State: *attempt.NewState(key)}
}

// removeKind is how an executor's removal reads in this application
// (sizing.Settings.RemoveKind): its properties say whether a SIGTERM is
// its executors' end out of heap.
func (st *appState) removeKind(reason string) string {
	return sizing.Settings{KillOnOOM: sizing.KillOnOOM(st.Properties)}.RemoveKind(reason)
}

// refresh takes what the listing of s says of the attempt.
func (st *appState) refresh(s *source, app *sparkapi.Application, att *sparkapi.Attempt) {
	st.Refresh(s.base, app, att)
	if s.rm != "" {
		st.rm = s.rm
	}
}

// syncApp brings the attempt's jobs, stages and SQL executions up to date
// and writes what changed. A completed attempt is read in full once more,
// so its final state is exact, and is then final.
func (p *Poller) syncApp(ctx context.Context, st *appState, now time.Time) error {
	ctx = context.WithValue(ctx, appStateKey{}, st)
	// A History Server's lastUpdated is the event log's modification
	// time: unchanged, nothing is new. A live UI reports the start time
	// there, which says nothing.
	// A completed attempt read in full since it completed is unchanged
	// too while it waits for its accounting.
	unchanged := st.synced && (!st.Completed || st.endRead) && st.Updated == st.syncedAt && st.Updated != st.Key.Start
	if st.rm == "" && st.Properties != nil {
		// A configured source (a History Server listing the running
		// application) may claim it before the metrics have named it to
		// a YARN proxy template: YARN is asked once the template knows it.
		p.mu.Lock()
		st.rm = p.rmLocked(st.Key.App)
		p.mu.Unlock()
		p.syncYARN(ctx, st)
	}
	if !unchanged {
		if err := p.readAll(ctx, st, !st.synced || st.Completed); err != nil {
			return err
		}
		st.synced, st.syncedAt = true, st.Updated
		st.endRead = st.Completed
		st.Prune()
		p.addrs.note(st, now)
	}
	p.account(ctx, st, now)
	st.lastSeen = now
	p.emit(st, now, false)
	st.final = st.Completed && st.accounted
	return nil
}

// readAll reads the attempt through the poller's reader (in full, or
// what changed), and YARN's word on it once its properties are read.
func (p *Poller) readAll(ctx context.Context, st *appState, full bool) error {
	first := st.Properties == nil
	if err := p.reader.Read(ctx, &st.State, full); err != nil {
		return err
	}
	if first {
		p.syncYARN(ctx, st)
	}
	return nil
}

// maxPointsPerEmit is an application's share of the annotation writer
// per poll: a first read of 10 000 stages takes ten polls, and other
// applications' facts are not held behind it.
const maxPointsPerEmit = 2000

// syncYARN reads, once, what YARN's ResourceManager says of an
// application whose UI its proxy serves: the queue it ran in (the leaf's
// full path, after YARN's placement rules, which spark.yarn.queue only
// asks for) and the user it ran for. A failure costs only that: the
// queue is then spark.yarn.queue's, the user Spark's.
func (p *Poller) syncYARN(ctx context.Context, st *appState) {
	if st.rm == "" || st.yarnRead {
		return
	}
	st.yarnRead = true
	if a := p.yarnApp(ctx, st); a != nil {
		st.yarnQueue, st.yarnUser = a.App.Queue, a.App.User
	}
}

// yarnApp is what YARN's ResourceManager says of the application, nil
// when it says nothing of it.
func (p *Poller) yarnApp(ctx context.Context, st *appState) *sparkapi.YARNApplication {
	var a sparkapi.YARNApplication
	if err := p.get(ctx, st.rm+"/ws/v1/cluster/apps/"+url.PathEscape(st.Key.App), &a); err != nil {
		p.log.Debug("YARN's ResourceManager did not answer for the application", zap.String("application", st.Key.App), zap.Error(err))
		return nil
	}
	if a.App.ID != st.Key.App {
		return nil
	}
	return &a
}
