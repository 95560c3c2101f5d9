package annotate

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
	"go.uber.org/zap"
)

// burst is the number of single-item requests beyond which one full list
// is cheaper.
const burst = 32

// retain bounds the finished items kept per attempt, like Spark's own
// spark.ui.retainedJobs/Stages and spark.sql.ui.retainedExecutions.
const retain = 1000

// sqlPage is the page length for SQL executions.
const sqlPage = 100

// sqlRecheck: after /sql answered 404 (no Spark SQL in the application),
// it is asked again only every this many syncs.
const sqlRecheck = 30

// executorsEvery: between full reads, a running application's executors
// are read every this many syncs. Spark has no incremental executor list,
// and an application with hundreds of executors answers with about 2 KB
// each.
const executorsEvery = 3

type executorItem struct{ sparkapi.Executor }

type stageKey struct{ id, attempt int }

type jobItem struct{ sparkapi.Job }

type stageItem struct {
	sparkapi.Stage
	details  *stageDetails  // nil until it ended and its details were tried
	progress *stageProgress // read this sync while it runs; written, then cleared
}

type sqlItem struct{ sparkapi.SQLExecution }

// appState is what the poller knows of one application attempt.
type appState struct {
	key       appKey
	name      string
	attemptID string
	user      string
	version   string
	// YARN's word on where the application ran and for whom, read once
	// from the ResourceManager whose proxy serves its UI (source.rm).
	rm                  string
	yarnRead            bool
	yarnQueue, yarnUser string
	// YARN's own accounting of the application, read once after its end
	// (usage.go): nil until then, or when it could not be read.
	yarnHeld  *sparkapi.YARNApplication
	url       string // …/api/v1/applications/{app}[/{attempt}] on the owning source
	completed bool
	end       int64 // epoch ms; -1 while running
	updated   int64 // lastUpdated as last listed
	syncedAt  int64 // lastUpdated as of the last sync

	synced   bool // read in full at least once from the current source
	final    bool // written in its completed state
	lastSeen time.Time
	lostAt   time.Time
	// goneWhy says why it was closed out as lost while a History Server
	// showed it running (gone.go).
	goneWhy string
	syncs   int
	// syncing is closed when a sync started by a configured source's poll
	// ends, and syncErr is then its outcome; nil when no sync runs. Only
	// the goroutine polling the source reads them, and touches nothing
	// else of the state while it is open (pollSource).
	syncing chan struct{}
	syncErr error

	jobs       map[int]*jobItem
	maxJob     int
	stages     map[stageKey]*stageItem
	goneStages map[int]bool // stage ids Spark no longer knows
	recheck    []int        // stage ids to read again: their job ended with failed stages
	sql        map[int64]*sqlItem
	maxSQL     int64
	sqlNext    int // offset just past maxSQL in Spark's list, as last seen
	sqlAbsent  bool

	executors       map[string]*executorItem
	executorsAbsent bool // allexecutors answered 404 (Spark before 1.6)

	// Sizing advice, worked out once the attempt has completed.
	properties map[string]string // the environment's Spark properties; nil until read
	hadoop     map[string]string // of its Hadoop properties, sizing.YARNAllocationKeys
	profiles   []sparkapi.ResourceProfile
	metricsKey string   // the applicationid its metrics carry (namespace.go), once properties are read
	namesakes  []string // other applications of the source, of the same name, running at the same time
	tag        string   // the applicationid of its points, once decided (tagKey)
	// Accounting (usage.go).
	endRead      bool                     // read in full since it completed
	accounted    bool                     // the stream was read (or given up on) after the end
	streamTries  int                      // failed reads of the stream
	invalid      int                      // values of its answers no Spark writes, read as absent (sparkapi.Check)
	invalidSeen  []string                 // the first few of them
	streamFailed time.Time                // the first failed read
	streamNext   time.Time                // no read before
	streamErr    string                   // why the accounting went without the stream
	stream       map[string]ProcessTotals // the stream's totals, once accounted
	estimate     *usageRead               // a running estimate's read: written, then cleared
	estimatedAt  time.Time                // when the last estimate was read
	acc          map[string]ProcessTotals // the running estimates' stream up to accTo, read once (estimateStream)
	accTo        time.Time
	stageTotals  *accounting.StageTotals // over every stage attempt, from the full read after the end
}

func newAppState(key appKey) *appState {
	return &appState{key: key, end: -1, maxJob: -1, maxSQL: -1,
		jobs: map[int]*jobItem{}, stages: map[stageKey]*stageItem{}, goneStages: map[int]bool{}, sql: map[int64]*sqlItem{},
		executors: map[string]*executorItem{}}
}

// removeKind is how an executor's removal reads in this application
// (sizing.Settings.RemoveKind): its properties say whether a SIGTERM is
// its executors' end out of heap.
func (st *appState) removeKind(reason string) string {
	return sizing.Settings{KillOnOOM: sizing.KillOnOOM(st.properties)}.RemoveKind(reason)
}

// refresh takes what the listing says of the attempt.
func (st *appState) refresh(s *source, app *sparkapi.Application, att *sparkapi.Attempt) {
	st.name, st.attemptID = app.Name, att.AttemptID
	st.user, st.version = att.SparkUser, att.AppSparkVersion
	st.completed, st.end, st.updated = att.Completed, att.EndMs(), att.LastUpdatedMs()
	if s.rm != "" {
		st.rm = s.rm
	}
	st.url = s.base + "/api/v1/applications/" + url.PathEscape(app.ID)
	if att.AttemptID != "" {
		st.url += "/" + url.PathEscape(att.AttemptID)
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
	unchanged := st.synced && (!st.completed || st.endRead) && st.updated == st.syncedAt && st.updated != st.key.start
	if st.rm == "" && st.properties != nil {
		// A configured source (a History Server listing the running
		// application) may claim it before the metrics have named it to
		// a YARN proxy template: YARN is asked once the template knows it.
		p.mu.Lock()
		st.rm = p.rmLocked(st.key.app)
		p.mu.Unlock()
		p.syncYARN(ctx, st)
	}
	if !unchanged {
		if err := p.readAll(ctx, st, !st.synced || st.completed); err != nil {
			return err
		}
		st.synced, st.syncedAt = true, st.updated
		st.endRead = st.completed
		st.syncs++
		st.prune()
		p.addrs.note(st, now)
	}
	p.account(ctx, st, now)
	st.lastSeen = now
	p.emit(st, now, false)
	st.final = st.completed && st.accounted
	return nil
}

// readAll reads the attempt's jobs, stages, SQL executions, executors and
// stage details (in full, or what changed), and its properties the first
// time.
func (p *Poller) readAll(ctx context.Context, st *appState, full bool) error {
	ctx = context.WithValue(ctx, appStateKey{}, st)
	if err := p.syncJobs(ctx, st, full); err != nil {
		return err
	}
	if err := p.syncStages(ctx, st, full); err != nil {
		return err
	}
	if err := p.syncSQL(ctx, st, full); err != nil {
		return err
	}
	if err := p.syncExecutors(ctx, st, full); err != nil {
		return err
	}
	if err := p.syncStageDetails(ctx, st); err != nil {
		return err
	}
	// The properties, on the first sync: the metrics' key (namespace.go)
	// is needed before the first point; and for the sizing advice and the
	// accounting.
	if st.properties == nil {
		return p.syncEnvironment(ctx, st)
	}
	return nil
}

func (st *appState) putJob(j sparkapi.Job) (finished bool) {
	it := st.jobs[j.JobID]
	if it == nil {
		it = &jobItem{}
		st.jobs[j.JobID] = it
	}
	finished = it.Status == "RUNNING" && j.Status != "RUNNING"
	it.Job = j
	st.maxJob = max(st.maxJob, j.JobID)
	if finished && j.NumFailedStages > 0 {
		st.recheck = append(st.recheck, j.StageIDs...)
	}
	return finished
}

// syncJobs reads the jobs: all of them when full, else the running ones,
// those that stopped running, and new ids up to Spark's first 404.
func (p *Poller) syncJobs(ctx context.Context, st *appState, full bool) error {
	if full {
		var list []sparkapi.Job
		if err := p.get(ctx, st.url+"/jobs", &list); err != nil {
			return err
		}
		keep := map[int]bool{}
		for _, j := range list {
			st.putJob(j)
			keep[j.JobID] = true
		}
		for id := range st.jobs {
			if !keep[id] {
				delete(st.jobs, id) // evicted by Spark
			}
		}
		return nil
	}
	var running []sparkapi.Job
	if err := p.get(ctx, st.url+"/jobs?status=running", &running); err != nil {
		return err
	}
	isRunning := map[int]bool{}
	top := st.maxJob
	for _, j := range running {
		isRunning[j.JobID] = true
		top = max(top, j.JobID)
	}
	var fetch []int
	for id, j := range st.jobs {
		if j.Status == "RUNNING" && !isRunning[id] {
			fetch = append(fetch, id)
		}
	}
	for id := st.maxJob + 1; id < top; id++ {
		if !isRunning[id] && st.jobs[id] == nil {
			fetch = append(fetch, id) // started and ended between two polls
		}
	}
	if len(fetch) > burst {
		return p.syncJobs(ctx, st, true)
	}
	for _, j := range running {
		st.putJob(j)
	}
	slices.Sort(fetch)
	for _, id := range fetch {
		var j sparkapi.Job
		err := p.get(ctx, st.url+"/jobs/"+strconv.Itoa(id), &j)
		if sparkapi.IsNotFound(err) {
			delete(st.jobs, id)
			continue
		}
		if err != nil {
			return err
		}
		st.putJob(j)
	}
	// Job ids are consecutive: ask for the next until there is none.
	for n := 0; ; n++ {
		if n == burst {
			return p.syncJobs(ctx, st, true)
		}
		var j sparkapi.Job
		err := p.get(ctx, st.url+"/jobs/"+strconv.Itoa(st.maxJob+1), &j)
		if sparkapi.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		st.putJob(j)
	}
}

func (st *appState) putStage(s sparkapi.Stage) {
	k := stageKey{s.StageID, s.AttemptID}
	it := st.stages[k]
	if it == nil {
		it = &stageItem{}
		st.stages[k] = it
	}
	it.Stage = s
}

func (st *appState) hasStage(id int) bool {
	for k := range st.stages {
		if k.id == id {
			return true
		}
	}
	return false
}

// syncStages reads the stages: all of them when full, else the active and
// pending ones, those that left that list, those the jobs name and were
// never seen, and those of jobs that ended with failed stages (retries).
func (p *Poller) syncStages(ctx context.Context, st *appState, full bool) error {
	if full {
		var list []sparkapi.Stage
		if err := p.get(ctx, st.url+"/stages?details=false", &list); err != nil {
			return err
		}
		keep := map[stageKey]bool{}
		var t accounting.StageTotals
		for _, s := range list {
			st.putStage(s)
			keep[stageKey{s.StageID, s.AttemptID}] = true
			t.Add(&s)
		}
		if st.completed {
			st.stageTotals = &t // the whole list Spark kept, for the accounting
		}
		for k := range st.stages {
			if !keep[k] {
				delete(st.stages, k)
			}
		}
		st.recheck = nil
		return nil
	}
	var open []sparkapi.Stage
	if err := p.get(ctx, st.url+"/stages?status=active&status=pending&details=false", &open); err != nil {
		return err
	}
	isOpen := map[stageKey]bool{}
	openID := map[int]bool{}
	for _, s := range open {
		isOpen[stageKey{s.StageID, s.AttemptID}] = true
		openID[s.StageID] = true
	}
	fetch := map[int]bool{}
	for k, s := range st.stages {
		if (s.Status == "ACTIVE" || s.Status == "PENDING") && !isOpen[k] {
			fetch[k.id] = true
		}
	}
	known := map[int]bool{}
	for k := range st.stages {
		known[k.id] = true
	}
	for _, j := range st.jobs {
		for _, id := range j.StageIDs {
			if !known[id] && !openID[id] && !st.goneStages[id] {
				fetch[id] = true
			}
		}
	}
	for _, id := range st.recheck {
		fetch[id] = true
	}
	if len(fetch) > burst {
		return p.syncStages(ctx, st, true)
	}
	for _, s := range open {
		st.putStage(s)
	}
	ids := make([]int, 0, len(fetch))
	for id := range fetch {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		var attempts []sparkapi.Stage
		err := p.get(ctx, st.url+"/stages/"+strconv.Itoa(id)+"?details=false", &attempts)
		if sparkapi.IsNotFound(err) {
			st.goneStages[id] = true
			continue
		}
		if err != nil {
			return err
		}
		for _, s := range attempts {
			st.putStage(s)
		}
	}
	st.recheck = nil
	return nil
}

const sqlParams = "details=false&planDescription=false"

func (st *appState) putSQL(x sparkapi.SQLExecution) {
	it := st.sql[x.ID]
	if it == nil {
		it = &sqlItem{}
		st.sql[x.ID] = it
	}
	it.SQLExecution = x
	st.maxSQL = max(st.maxSQL, x.ID)
}

// syncSQL reads the SQL executions: all pages when full, else the running
// ones one by one and new ones by page from the last one seen. An
// application without Spark SQL answers 404, and is asked again only now
// and then.
func (p *Poller) syncSQL(ctx context.Context, st *appState, full bool) error {
	if st.sqlAbsent && !full && st.syncs%sqlRecheck != 0 {
		return nil
	}
	if full {
		st.sqlNext = 0
		keep := map[int64]bool{}
		for {
			page, err := p.sqlPage(ctx, st, st.sqlNext)
			if sparkapi.IsNotFound(err) {
				st.sqlAbsent = true
				return nil
			}
			if err != nil {
				return err
			}
			for _, x := range page {
				st.putSQL(x)
				keep[x.ID] = true
			}
			st.sqlNext += len(page)
			if len(page) < sqlPage {
				break
			}
		}
		st.sqlAbsent = false
		for id := range st.sql {
			if !keep[id] {
				delete(st.sql, id)
			}
		}
		return nil
	}
	var running []int64
	for id, x := range st.sql {
		if x.Status == "RUNNING" {
			running = append(running, id)
		}
	}
	if len(running) > burst {
		return p.syncSQL(ctx, st, true)
	}
	for _, id := range running {
		var x sparkapi.SQLExecution
		err := p.get(ctx, st.url+"/sql/"+strconv.FormatInt(id, 10)+"?"+sqlParams, &x)
		if sparkapi.IsNotFound(err) {
			delete(st.sql, id)
			continue
		}
		if err != nil {
			return err
		}
		st.putSQL(x)
	}
	// New executions, from one before the next offset: that overlap, the
	// last execution seen, shows whether Spark evicted old executions and
	// so moved the offsets down.
	o := max(st.sqlNext-1, 0)
	aligned := o == 0
	for realign := 0; ; {
		page, err := p.sqlPage(ctx, st, o)
		if sparkapi.IsNotFound(err) {
			st.sqlAbsent = true
			return nil
		}
		if err != nil {
			return err
		}
		st.sqlAbsent = false
		if !aligned && (len(page) == 0 || page[0].ID > st.maxSQL) {
			if realign++; realign > 4 {
				return p.syncSQL(ctx, st, true)
			}
			step := sqlPage
			if len(page) > 0 {
				step = int(page[0].ID - st.maxSQL)
			}
			o = max(o-step, 0)
			aligned = o == 0
			continue
		}
		aligned = true
		for _, x := range page {
			if x.ID > st.maxSQL || st.sql[x.ID] != nil {
				st.putSQL(x)
			}
		}
		o += len(page)
		if len(page) < sqlPage {
			break
		}
	}
	st.sqlNext = o
	return nil
}

func (p *Poller) sqlPage(ctx context.Context, st *appState, offset int) ([]sparkapi.SQLExecution, error) {
	var page []sparkapi.SQLExecution
	err := p.get(ctx, st.url+"/sql?"+sqlParams+"&offset="+strconv.Itoa(offset)+"&length="+strconv.Itoa(sqlPage), &page)
	return page, err
}

// prune keeps at most retain finished jobs, stages and executions, the
// newest; Spark itself forgets older ones.
func (st *appState) prune() {
	pruneMap(st.jobs, func(j *jobItem) bool { return j.Status != "RUNNING" }, func(id int) int { return id })
	pruneMap(st.stages, func(s *stageItem) bool { return s.Status != "ACTIVE" && s.Status != "PENDING" },
		func(k stageKey) int { return k.id })
	pruneMap(st.sql, func(x *sqlItem) bool { return x.Status != "RUNNING" }, func(id int64) int { return int(id) })
	if len(st.goneStages) > retain {
		clear(st.goneStages)
	}
}

func pruneMap[K comparable, V any](m map[K]V, done func(V) bool, order func(K) int) {
	if len(m) <= retain {
		return
	}
	var finished []K
	for k, v := range m {
		if done(v) {
			finished = append(finished, k)
		}
	}
	slices.SortFunc(finished, func(a, b K) int { return order(a) - order(b) })
	for _, k := range finished[:min(len(finished), len(m)-retain)] {
		delete(m, k)
	}
}

// syncExecutors reads the driver and executors, removed ones included: in
// full, at every sync until the first executor is listed (the first read
// comes as the driver starts, before any registers; in local mode, where
// the driver is the only one, its one-entry list at every sync), then
// every executorsEvery syncs. Executors Spark no longer lists are kept; an
// application's executors are bounded by what it ran.
func (p *Poller) syncExecutors(ctx context.Context, st *appState, full bool) error {
	if !full && (st.executorsAbsent || (st.syncs%executorsEvery != 0 && st.hasExecutor())) {
		return nil
	}
	var list []sparkapi.Executor
	err := p.get(ctx, st.url+"/allexecutors", &list)
	if sparkapi.IsNotFound(err) {
		st.executorsAbsent = true
		return nil
	}
	if err != nil {
		return err
	}
	st.executorsAbsent = false
	for _, x := range list {
		it := st.executors[x.ID]
		if it == nil {
			if len(st.executors) >= maxExecutorsPerApp {
				p.stats.cappedExecutors.Add(1)
				continue
			}
			it = &executorItem{}
			st.executors[x.ID] = it
		}
		it.Executor = x
	}
	return nil
}

// hasExecutor reports whether Spark has listed an executor of the
// attempt, the driver aside.
func (st *appState) hasExecutor() bool {
	for id := range st.executors {
		if id != "driver" {
			return true
		}
	}
	return false
}

// Bounds on what one application's answers may cost. Spark lists the
// active executors and the last spark.ui.retainedDeadExecutors (100)
// removed ones: a real application reaches maxExecutorsPerApp only with
// thousands of executors added over its life, and a UI that invents new
// ids at every read stops there. maxPointsPerEmit is an application's
// share of the annotation writer per poll: a first read of 10 000 stages
// takes ten polls, and other applications' facts are not held behind it.
const (
	maxExecutorsPerApp = 4096
	maxPointsPerEmit   = 2000
)

// syncEnvironment reads the attempt's Spark properties: the metrics' key,
// the sizing advice and the accounting. A source without the page (Spark
// before 1.4) gives none.
func (p *Poller) syncEnvironment(ctx context.Context, st *appState) error {
	var env sparkapi.Environment
	err := p.get(ctx, st.url+"/environment", &env)
	if err != nil && !sparkapi.IsNotFound(err) {
		return err
	}
	st.properties = env.Properties()
	st.hadoop = env.HadoopSubset(sizing.YARNAllocationKeys)
	st.profiles = env.ResourceProfiles
	st.metricsKey = metricsKey(st.key.app, st.properties)
	p.syncYARN(ctx, st)
	return nil
}

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
	if err := p.get(ctx, st.rm+"/ws/v1/cluster/apps/"+url.PathEscape(st.key.app), &a); err != nil {
		p.log.Debug("YARN's ResourceManager did not answer for the application", zap.String("application", st.key.app), zap.Error(err))
		return nil
	}
	if a.App.ID != st.key.app {
		return nil
	}
	return &a
}
