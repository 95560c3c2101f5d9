package attempt

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sparkpulse/sparkpulse/accounting"
	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// burst is the number of single-item requests beyond which one full list
// is cheaper.
const burst = 32

// sqlPage is the page length for SQL executions.
const sqlPage = 100

// sqlRecheck: after /sql answered 404 (no Spark SQL in the application),
// it is asked again only every this many reads.
const sqlRecheck = 30

// executorsEvery: between full reads, a running application's executors
// are read every this many reads. Spark has no incremental executor list,
// and an application with hundreds of executors answers with about 2 KB
// each.
const executorsEvery = 3

// MaxExecutors bounds the executors kept of one attempt. Spark lists the
// active executors and the last spark.ui.retainedDeadExecutors (100)
// removed ones: a real application reaches it only with thousands of
// executors added over its life, and a UI that invents new ids at every
// read stops there.
const MaxExecutors = 4096

// Getter reads one answer of Spark's REST API at url into out.
type Getter func(ctx context.Context, url string, out any) error

// Reader reads application attempts into their State. Its reads of one
// State must not overlap; reads of different States may.
type Reader struct {
	Get Getter
	// StageDetailsMinDuration, StageDetailsRequests and
	// FailedTasksPerStage bound the reads of stage details (Config).
	StageDetailsMinDuration time.Duration
	StageDetailsRequests    int
	FailedTasksPerStage     int
	Now                     func() time.Time
	// EndWritten, when set, reports whether the end of a stage attempt
	// that started at startMs was written before (by an earlier process):
	// its details are not read again.
	EndWritten func(st *State, k StageKey, startMs int64) bool

	capped atomic.Uint64 // executors past MaxExecutors, not kept
	// Stage attempts that ended, by what became of their details.
	detailsRead, detailsShort, detailsBudget, detailsUnavailable atomic.Uint64
}

// NewReader is the Reader cfg describes, reading through a client of its
// own: the values of an answer no Spark writes are read as absent,
// uncounted.
func NewReader(cfg Config) *Reader {
	cfg = cfg.WithDefaults()
	client := sparkapi.NewClient(sparkapi.ClientConfig{Transport: cfg.Transport, Auth: cfg.Auth, Timeout: cfg.Timeout,
		MaxResponseBytes: cfg.MaxResponseBytes, Now: cfg.Now})
	return &Reader{
		Get: func(ctx context.Context, url string, out any) error {
			_, err := client.Get(ctx, url, out)
			return err
		},
		StageDetailsMinDuration: cfg.StageDetailsMinDuration, StageDetailsRequests: cfg.StageDetailsRequests,
		FailedTasksPerStage: cfg.FailedTasksPerStage, Now: cfg.Now,
	}
}

// Read brings st up to date: its jobs, stages, SQL executions, executors
// and the details of the stages that ended (in full, or what changed
// since the last read), and its properties the first time.
func (r *Reader) Read(ctx context.Context, st *State, full bool) error {
	if err := r.readJobs(ctx, st, full); err != nil {
		return err
	}
	if err := r.readStages(ctx, st, full); err != nil {
		return err
	}
	if err := r.readSQL(ctx, st, full); err != nil {
		return err
	}
	if err := r.readExecutors(ctx, st, full); err != nil {
		return err
	}
	if err := r.readStageDetails(ctx, st); err != nil {
		return err
	}
	// The properties, on the first read: the metrics' key is needed
	// before the first point; and for the sizing advice and the
	// accounting.
	if st.Properties == nil {
		if err := r.readEnvironment(ctx, st); err != nil {
			return err
		}
	}
	st.reads++
	return nil
}

// Counts are what a Reader's reads have left out, since it was made.
type Counts struct {
	// Details counts the stage attempts that ended by what became of
	// their details: DetailsRead, DetailsShort, DetailsBudget, and of
	// those read DetailsUnavailable.
	Details map[string]uint64
	// CappedExecutors counts the executors past MaxExecutors, not kept.
	CappedExecutors uint64
}

// Counts returns the counts.
func (r *Reader) Counts() Counts {
	return Counts{CappedExecutors: r.capped.Load(), Details: map[string]uint64{DetailsRead: r.detailsRead.Load(),
		DetailsShort: r.detailsShort.Load(), DetailsBudget: r.detailsBudget.Load(), DetailsUnavailable: r.detailsUnavailable.Load()}}
}

// countDetails counts a stage attempt by the fate of its details.
func (r *Reader) countDetails(why string) {
	switch why {
	case DetailsRead:
		r.detailsRead.Add(1)
	case DetailsShort:
		r.detailsShort.Add(1)
	case DetailsBudget:
		r.detailsBudget.Add(1)
	case DetailsUnavailable:
		r.detailsUnavailable.Add(1)
	}
}

// readJobs reads the jobs: all of them when full, else the running ones,
// those that stopped running, and new ids up to Spark's first 404.
func (r *Reader) readJobs(ctx context.Context, st *State, full bool) error {
	if full {
		var list []sparkapi.Job
		if err := r.Get(ctx, st.URL+"/jobs", &list); err != nil {
			return err
		}
		keep := map[int]bool{}
		for _, j := range list {
			st.putJob(j)
			keep[j.JobID] = true
		}
		for id := range st.Jobs {
			if !keep[id] {
				delete(st.Jobs, id) // evicted by Spark
			}
		}
		return nil
	}
	var running []sparkapi.Job
	if err := r.Get(ctx, st.URL+"/jobs?status=running", &running); err != nil {
		return err
	}
	isRunning := map[int]bool{}
	top := st.maxJob
	for _, j := range running {
		isRunning[j.JobID] = true
		top = max(top, j.JobID)
	}
	var fetch []int
	for id, j := range st.Jobs {
		if j.Status == "RUNNING" && !isRunning[id] {
			fetch = append(fetch, id)
		}
	}
	for id := st.maxJob + 1; id < top; id++ {
		if !isRunning[id] && st.Jobs[id] == nil {
			fetch = append(fetch, id) // started and ended between two reads
		}
	}
	if len(fetch) > burst {
		return r.readJobs(ctx, st, true)
	}
	for _, j := range running {
		st.putJob(j)
	}
	slices.Sort(fetch)
	for _, id := range fetch {
		var j sparkapi.Job
		err := r.Get(ctx, st.URL+"/jobs/"+strconv.Itoa(id), &j)
		if sparkapi.IsNotFound(err) {
			delete(st.Jobs, id)
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
			return r.readJobs(ctx, st, true)
		}
		var j sparkapi.Job
		err := r.Get(ctx, st.URL+"/jobs/"+strconv.Itoa(st.maxJob+1), &j)
		if sparkapi.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		st.putJob(j)
	}
}

// readStages reads the stages: all of them when full, else the active and
// pending ones, those that left that list, those the jobs name and were
// never seen, and those of jobs that ended with failed stages (retries).
func (r *Reader) readStages(ctx context.Context, st *State, full bool) error {
	if full {
		var list []sparkapi.Stage
		if err := r.Get(ctx, st.URL+"/stages?details=false", &list); err != nil {
			return err
		}
		keep := map[StageKey]bool{}
		var t accounting.StageTotals
		for _, s := range list {
			st.putStage(s)
			keep[StageKey{s.StageID, s.AttemptID}] = true
			t.Add(&s)
		}
		if st.Completed {
			st.StageTotals = &t // the whole list Spark kept, for the accounting
		}
		for k := range st.Stages {
			if !keep[k] {
				delete(st.Stages, k)
			}
		}
		st.recheck = nil
		return nil
	}
	var open []sparkapi.Stage
	if err := r.Get(ctx, st.URL+"/stages?status=active&status=pending&details=false", &open); err != nil {
		return err
	}
	isOpen := map[StageKey]bool{}
	openID := map[int]bool{}
	for _, s := range open {
		isOpen[StageKey{s.StageID, s.AttemptID}] = true
		openID[s.StageID] = true
	}
	fetch := map[int]bool{}
	for k, s := range st.Stages {
		if (s.Status == "ACTIVE" || s.Status == "PENDING") && !isOpen[k] {
			fetch[k.ID] = true
		}
	}
	known := map[int]bool{}
	for k := range st.Stages {
		known[k.ID] = true
	}
	for _, j := range st.Jobs {
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
		return r.readStages(ctx, st, true)
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
		err := r.Get(ctx, st.URL+"/stages/"+strconv.Itoa(id)+"?details=false", &attempts)
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

// readSQL reads the SQL executions: all pages when full, else the running
// ones one by one and new ones by page from the last one seen. An
// application without Spark SQL answers 404, and is asked again only now
// and then.
func (r *Reader) readSQL(ctx context.Context, st *State, full bool) error {
	if st.sqlAbsent && !full && st.reads%sqlRecheck != 0 {
		return nil
	}
	if full {
		st.sqlNext = 0
		keep := map[int64]bool{}
		for {
			page, err := r.sqlPage(ctx, st, st.sqlNext)
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
		for id := range st.SQL {
			if !keep[id] {
				delete(st.SQL, id)
			}
		}
		return nil
	}
	var running []int64
	for id, x := range st.SQL {
		if x.Status == "RUNNING" {
			running = append(running, id)
		}
	}
	if len(running) > burst {
		return r.readSQL(ctx, st, true)
	}
	for _, id := range running {
		var x sparkapi.SQLExecution
		err := r.Get(ctx, st.URL+"/sql/"+strconv.FormatInt(id, 10)+"?"+sqlParams, &x)
		if sparkapi.IsNotFound(err) {
			delete(st.SQL, id)
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
		page, err := r.sqlPage(ctx, st, o)
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
				return r.readSQL(ctx, st, true)
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
			if x.ID > st.maxSQL || st.SQL[x.ID] != nil {
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

func (r *Reader) sqlPage(ctx context.Context, st *State, offset int) ([]sparkapi.SQLExecution, error) {
	var page []sparkapi.SQLExecution
	err := r.Get(ctx, st.URL+"/sql?"+sqlParams+"&offset="+strconv.Itoa(offset)+"&length="+strconv.Itoa(sqlPage), &page)
	return page, err
}

// readExecutors reads the driver and executors, removed ones included: in
// full, at every read until the first executor is listed (the first read
// comes as the driver starts, before any registers; in local mode, where
// the driver is the only one, its one-entry list at every read), then
// every executorsEvery reads. Executors Spark no longer lists are kept; an
// application's executors are bounded by what it ran.
func (r *Reader) readExecutors(ctx context.Context, st *State, full bool) error {
	if !full && (st.executorsAbsent || (st.reads%executorsEvery != 0 && st.hasExecutor())) {
		return nil
	}
	var list []sparkapi.Executor
	err := r.Get(ctx, st.URL+"/allexecutors", &list)
	if sparkapi.IsNotFound(err) {
		st.executorsAbsent = true
		return nil
	}
	if err != nil {
		return err
	}
	st.executorsAbsent = false
	for _, x := range list {
		it := st.Executors[x.ID]
		if it == nil {
			if len(st.Executors) >= MaxExecutors {
				r.capped.Add(1)
				continue
			}
			it = &Executor{}
			st.Executors[x.ID] = it
		}
		it.Executor = x
	}
	return nil
}

// readEnvironment reads the attempt's Spark properties: the metrics' key,
// the sizing advice and the accounting. A source without the page (Spark
// before 1.4) gives none.
func (r *Reader) readEnvironment(ctx context.Context, st *State) error {
	var env sparkapi.Environment
	err := r.Get(ctx, st.URL+"/environment", &env)
	if err != nil && !sparkapi.IsNotFound(err) {
		return err
	}
	st.Properties = env.Properties()
	st.Hadoop = env.HadoopSubset(sizing.YARNAllocationKeys)
	st.Profiles = env.ResourceProfiles
	st.MetricsKey = MetricsKey(st.Key.App, st.Properties)
	return nil
}
