package annotate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/sizing"
)

// The JSON that Spark's REST API returns, as far as annotations need it.
// Optional fields that Spark omits decode to their zero values.

type apiApp struct {
	ID       string       `json:"id"`
	Name     string       `json:"name"`
	Attempts []apiAttempt `json:"attempts"`
}

type apiAttempt struct {
	AttemptID        string    `json:"attemptId"`
	StartTime        sparkTime `json:"startTime"`
	EndTime          sparkTime `json:"endTime"`
	LastUpdated      sparkTime `json:"lastUpdated"`
	SparkUser        string    `json:"sparkUser"`
	Completed        bool      `json:"completed"`
	AppSparkVersion  string    `json:"appSparkVersion"`
	StartTimeEpoch   *int64    `json:"startTimeEpoch"`
	EndTimeEpoch     *int64    `json:"endTimeEpoch"`
	LastUpdatedEpoch *int64    `json:"lastUpdatedEpoch"`
}

// start, end and lastUpdated prefer the epoch fields (Spark 2.0+) to the
// formatted dates.
func (a *apiAttempt) start() int64 { return epochOr(a.StartTimeEpoch, a.StartTime) }
func (a *apiAttempt) end() int64 {
	if !a.Completed {
		return -1
	}
	return epochOr(a.EndTimeEpoch, a.EndTime)
}
func (a *apiAttempt) lastUpdated() int64 { return epochOr(a.LastUpdatedEpoch, a.LastUpdated) }

func epochOr(epoch *int64, t sparkTime) int64 {
	if epoch != nil && *epoch > 0 {
		return *epoch
	}
	return t.ms()
}

type apiJob struct {
	JobID              int        `json:"jobId"`
	Name               string     `json:"name"`
	Description        string     `json:"description"`
	SubmissionTime     *sparkTime `json:"submissionTime"`
	CompletionTime     *sparkTime `json:"completionTime"`
	StageIDs           []int      `json:"stageIds"`
	JobGroup           string     `json:"jobGroup"`
	Status             string     `json:"status"`
	NumTasks           int        `json:"numTasks"`
	NumActiveTasks     int        `json:"numActiveTasks"`
	NumCompletedTasks  int        `json:"numCompletedTasks"`
	NumSkippedTasks    int        `json:"numSkippedTasks"`
	NumFailedTasks     int        `json:"numFailedTasks"`
	NumKilledTasks     int        `json:"numKilledTasks"`
	NumActiveStages    int        `json:"numActiveStages"`
	NumCompletedStages int        `json:"numCompletedStages"`
	NumSkippedStages   int        `json:"numSkippedStages"`
	NumFailedStages    int        `json:"numFailedStages"`
}

type apiStage struct {
	Status             string     `json:"status"`
	StageID            int        `json:"stageId"`
	AttemptID          int        `json:"attemptId"`
	NumTasks           int        `json:"numTasks"`
	NumActiveTasks     int        `json:"numActiveTasks"`
	NumCompleteTasks   int        `json:"numCompleteTasks"`
	NumFailedTasks     int        `json:"numFailedTasks"`
	NumKilledTasks     int        `json:"numKilledTasks"`
	SubmissionTime     *sparkTime `json:"submissionTime"`
	CompletionTime     *sparkTime `json:"completionTime"`
	FailureReason      string     `json:"failureReason"`
	Name               string     `json:"name"`
	Description        string     `json:"description"`
	ExecutorRunTime    int64      `json:"executorRunTime"`
	ExecutorCPUTime    int64      `json:"executorCpuTime"`
	InputBytes         int64      `json:"inputBytes"`
	OutputBytes        int64      `json:"outputBytes"`
	ShuffleReadBytes   int64      `json:"shuffleReadBytes"`
	ShuffleWriteBytes  int64      `json:"shuffleWriteBytes"`
	MemoryBytesSpilled int64      `json:"memoryBytesSpilled"`
	DiskBytesSpilled   int64      `json:"diskBytesSpilled"`
}

type apiSQL struct {
	ID             int64      `json:"id"`
	Status         string     `json:"status"`
	Description    string     `json:"description"`
	SubmissionTime *sparkTime `json:"submissionTime"`
	Duration       int64      `json:"duration"`
	RunningJobIDs  []int      `json:"runningJobIds"`
	SuccessJobIDs  []int      `json:"successJobIds"`
	FailedJobIDs   []int      `json:"failedJobIds"`
}

// apiExecutor is an entry of allexecutors: the driver ("driver") or an
// executor, active or removed.
type apiExecutor struct {
	ID                string           `json:"id"`
	HostPort          string           `json:"hostPort"`
	IsActive          bool             `json:"isActive"`
	TotalCores        int              `json:"totalCores"`
	MaxMemory         int64            `json:"maxMemory"`
	CompletedTasks    int              `json:"completedTasks"`
	FailedTasks       int              `json:"failedTasks"`
	TotalDuration     int64            `json:"totalDuration"` // ms of task time
	TotalGCTime       int64            `json:"totalGCTime"`   // ms
	AddTime           *sparkTime       `json:"addTime"`
	RemoveTime        *sparkTime       `json:"removeTime"`
	RemoveReason      string           `json:"removeReason"`
	PeakMemoryMetrics map[string]int64 `json:"peakMemoryMetrics"`
}

// sizing is what package sizing needs of the executor.
func (x *apiExecutor) sizing() sizing.Executor {
	return sizing.Executor{ID: x.ID, Peaks: x.PeakMemoryMetrics, TaskTimeMs: x.TotalDuration, GCTimeMs: x.TotalGCTime, RemoveReason: x.RemoveReason}
}

// environment is the environment page, as far as sizing needs it.
type environment struct {
	SparkProperties [][]string `json:"sparkProperties"`
}

// properties returns the Spark properties as a map, never nil.
func (e *environment) properties() map[string]string {
	m := map[string]string{}
	for _, kv := range e.SparkProperties {
		if len(kv) == 2 {
			m[kv[0]] = kv[1]
		}
	}
	return m
}

// sparkTime is a date as Spark writes it: "2015-02-03T16:43:06.296GMT"
// (UTC with the literal suffix GMT). Empty text is the zero time.
type sparkTime struct{ time.Time }

const sparkLayout = "2006-01-02T15:04:05.000GMT"

func (t *sparkTime) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("date %s: %w", b, err)
	}
	if s == "" {
		t.Time = time.Time{}
		return nil
	}
	v, err := time.Parse(sparkLayout, s)
	if err != nil {
		return fmt.Errorf("date %q is not Spark's yyyy-MM-dd'T'HH:mm:ss.SSS'GMT'", s)
	}
	t.Time = v
	return nil
}

// ms returns the time in epoch ms, 0 for the zero time.
func (t sparkTime) ms() int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// optMS is ms for an optional date.
func optMS(t *sparkTime) int64 {
	if t == nil {
		return 0
	}
	return t.ms()
}

// formatQueryDate writes a time as the REST API's date parameters take it.
func formatQueryDate(ms int64) string { return time.UnixMilli(ms).UTC().Format(sparkLayout) }

// Failure kinds, the label of the error counter.
const (
	kindNetwork = "network"
	kindStatus  = "http_status"
	kindDecode  = "decode"
)

// fetchError is a failed request, with its kind for the counters.
type fetchError struct {
	kind   string
	status int // for kindStatus
	url    string
	err    error
}

func (e *fetchError) Error() string {
	switch e.kind {
	case kindStatus:
		return fmt.Sprintf("GET %s: %d %s: %v", e.url, e.status, http.StatusText(e.status), e.err)
	}
	return fmt.Sprintf("GET %s: %v", e.url, e.err)
}

func (e *fetchError) Unwrap() error { return e.err }

// isNotFound reports whether err is Spark's 404: an unknown application,
// job, stage or execution, or an API part that is not there.
func isNotFound(err error) bool {
	var fe *fetchError
	return errors.As(err, &fe) && fe.kind == kindStatus && fe.status == http.StatusNotFound
}

// maxBody bounds a response; a full list of 1000 stages is a few MB.
const maxBody = 64 << 20

// get fetches url and decodes its JSON into out.
func (p *Poller) get(ctx context.Context, url string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return &fetchError{kind: kindNetwork, url: url, err: err}
	}
	req.Header.Set("Accept", "application/json")
	p.cfg.Auth.apply(req)
	p.stats.requests.Add(1)
	resp, err := p.client.Do(req)
	if err != nil {
		return &fetchError{kind: kindNetwork, url: url, err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	p.stats.bytes.Add(uint64(len(body)))
	if err != nil {
		return &fetchError{kind: kindNetwork, url: url, err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return &fetchError{kind: kindStatus, status: resp.StatusCode, url: url, err: errors.New(snippet(body))}
	}
	if len(body) > maxBody {
		return &fetchError{kind: kindDecode, url: url, err: fmt.Errorf("response larger than %d bytes", maxBody)}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &fetchError{kind: kindDecode, url: url, err: fmt.Errorf("%v; body starts %q", err, snippet(body))}
	}
	return nil
}

// snippet is the start of a response body, for error messages: an HTML
// page from a proxy, or Spark's one-line error.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 120 {
		b = append(b[:120:120], "…"...)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// Auth is how requests to Spark authenticate: HTTP basic auth with
// Username and Password, or a bearer Token. The zero value sends nothing.
type Auth struct {
	Username, Password string
	Token              string
}

func (a Auth) apply(r *http.Request) {
	switch {
	case a.Token != "":
		r.Header.Set("Authorization", "Bearer "+a.Token)
	case a.Username != "":
		r.SetBasicAuth(a.Username, a.Password)
	}
}

// String never shows the secret.
func (a Auth) String() string {
	switch {
	case a.Token != "":
		return "bearer token"
	case a.Username != "":
		return "basic auth as " + a.Username
	}
	return "none"
}
