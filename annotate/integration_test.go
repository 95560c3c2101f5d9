package annotate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// eventLogs are Spark's own test event logs (see testdata/README.md).
const eventLogs = "../testdata/spark-events"

// replayFixtures replays Spark's own test event logs (and three real Spark
// 3.5.3 logs from Kubernetes) into a model, as a History Server would.
func replayFixtures(t *testing.T) *sparkui.Model {
	t.Helper()
	m := &sparkui.Model{}
	if _, err := m.ReplayDir(eventLogs); err != nil {
		t.Fatal(err)
	}
	if len(m.Apps) < 15 {
		t.Fatalf("only %d applications replayed from %s", len(m.Apps), eventLogs)
	}
	return m
}

// writerTo returns a Writer to a fresh database of a real influxd.
func writerTo(t *testing.T, srv *influxtest.Server, db string) *influx.Writer {
	t.Helper()
	srv.Exec(t, fmt.Sprintf("CREATE DATABASE %q", db))
	// One request in flight, as sparkpulse runs it: rewrites must land in order.
	w, err := influx.NewWriter(influx.Config{URL: srv.URL, BatchTimeout: 10 * time.Millisecond, MaxInFlight: 1}, influx.Target{Bucket: db})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func closeWriter(t *testing.T, w *influx.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// rows queries InfluxDB and formats each row with the given columns, after
// the time (epoch ns) and the applicationid.
func rows(t *testing.T, srv *influxtest.Server, db, measurement string, cols ...string) []string {
	t.Helper()
	q := fmt.Sprintf(`SELECT %s FROM %q GROUP BY "applicationid"`, `"`+strings.Join(cols, `","`)+`"`, measurement)
	var out []string
	for _, s := range srv.Query(t, db, q) {
		for _, v := range s.Values {
			line := fmt.Sprint(v[0], " ", s.Tags["applicationid"])
			for _, x := range v[1:] {
				line += " " + fmt.Sprint(x)
			}
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return out
}

func nsText(ns int64) string { return strconv.FormatInt(ns, 10) }

// peak is the value as InfluxQL returns it: nil when the executor has none.
func peak(m map[string]int64, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return nil
}

func orNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Every application attempt, job, stage and SQL execution of Spark's own
// fixtures (all ended) becomes exactly one end fact in a real InfluxDB, and
// every executor one snapshot, with the values the REST API gives. The expectations are computed from the replayed model,
// not from the poller.
func TestFixturesRealInfluxDB(t *testing.T) {
	model := replayFixtures(t)
	shs := sparkui.NewServer(sparkui.HistoryServer, model)
	srv := influxtest.Start(t)
	w := writerTo(t, srv, "ann")
	p := newPoller(t, Config{Sources: []string{serve(t, shs)}, Sink: w, Lookback: 20 * 365 * 24 * time.Hour})
	p.PollOnce(context.Background())
	closeWriter(t, w)
	if st := p.Stats(); len(st.Errors) != 0 {
		t.Errorf("errors: %v", st.Errors)
	}
	for _, r := range shs.Requests() {
		if strings.Contains(r, "details=true") || strings.Contains(r, "/stages") && !strings.Contains(r, "details=false") &&
			!strings.Contains(r, "/taskSummary?") && !strings.Contains(r, "/taskList?") {
			t.Errorf("stages asked with task details: %s", r)
		}
	}

	var wantApps, wantJobs, wantStages, wantSQL, wantExecutors, wantRemovals []string
	for _, app := range model.Apps {
		for _, a := range app.Attempts {
			for _, x := range a.Executors {
				if x.Added.IsZero() {
					continue
				}
				status, end := "REMOVED", x.Removed
				if end.IsZero() {
					status, end = "ENDED", a.End
				}
				host, _, _ := strings.Cut(x.HostPort, ":")
				sub := int64(0)
				if x.ID != "driver" {
					n, err := strconv.Atoi(x.ID)
					if err != nil {
						t.Fatalf("executor id %q of %s is not a number", x.ID, app.ID)
					}
					sub = int64(n) + 1
				}
				reason, _, _ := strings.Cut(x.RemoveReason, "\n")
				// A snapshot at the time it was read: compared without it.
				wantExecutors = append(wantExecutors, fmt.Sprint(app.ID, " ", x.ID, " ", host, " ",
					status, " ", end.UnixMilli(), " ", x.Cores, " ", x.MaxMemory, " ", orNil(strings.TrimSpace(reason)), " ", peak(x.Peak, "JVMHeapMemory")))
				if !x.Removed.IsZero() {
					wantRemovals = append(wantRemovals, fmt.Sprint(nsText(x.Removed.UnixNano()+sub), " ", app.ID, " ", x.ID, " ",
						x.Added.UnixMilli(), " ", orNil(strings.TrimSpace(reason))))
				}
			}
			wantApps = append(wantApps, fmt.Sprint(nsText(factTime(a.Start.UnixMilli(), 0, phaseEnd)), " ", app.ID, " ", app.Name, " COMPLETED ",
				a.End.UnixMilli(), " ", orNil(a.ID)))
			first := map[int]time.Time{}
			last := map[int]time.Time{}
			for _, s := range a.Stages {
				if f, ok := first[s.ID]; !s.Submitted.IsZero() && (!ok || s.Submitted.Before(f)) {
					first[s.ID] = s.Submitted
				}
				if s.Completed.After(last[s.ID]) {
					last[s.ID] = s.Completed
				}
			}
			for _, j := range a.Jobs {
				// A job without times (Spark 1.x logs) spans its stages.
				start, end := j.Submitted, j.Completed
				for _, s := range j.StageIDs {
					if f, ok := first[s]; ok && j.Submitted.IsZero() && (start.IsZero() || f.Before(start)) {
						start = f
					}
					if j.Completed.IsZero() && last[s].After(end) {
						end = last[s]
					}
				}
				if start.IsZero() {
					continue
				}
				if end.Before(start) {
					end = start
				}
				var reason string
				if j.Status == sparkui.JobFailed {
					for _, s := range a.Stages {
						if s.Status == sparkui.StageFailed && slices.Contains(j.StageIDs, s.ID) && reason == "" {
							reason, _, _ = strings.Cut(s.FailureReason, "\n")
						}
					}
				}
				wantJobs = append(wantJobs, fmt.Sprint(nsText(factTime(start.UnixMilli(), int64(j.ID), phaseEnd)), " ", app.ID, " ", j.ID, " ", j.Status, " ",
					end.UnixMilli(), " ", j.Tasks, " ", j.CompletedTasks, " ", j.FailedTasks, " ", orNil(strings.TrimSpace(reason))))
			}
			for _, s := range a.Stages {
				if s.Submitted.IsZero() {
					continue
				}
				reason, _, _ := strings.Cut(s.FailureReason, "\n")
				wantStages = append(wantStages, fmt.Sprint(nsText(factTime(s.Submitted.UnixMilli(), int64(s.ID*10+s.Attempt), phaseEnd)), " ", app.ID, " ",
					s.ID, " ", s.Attempt, " ", s.Status, " ", s.Completed.UnixMilli(), " ", s.Tasks, " ", s.FailedTasks, " ",
					s.RunTimeMs, " ", orNil(strings.TrimSpace(reason))))
			}
			for _, x := range a.Executions {
				wantSQL = append(wantSQL, fmt.Sprint(nsText(factTime(x.Submitted.UnixMilli(), x.ID, phaseEnd)), " ", app.ID, " ", x.ID, " ", x.Status(), " ",
					x.Completed.UnixMilli(), " ", x.Description))
			}
		}
	}
	slices.Sort(wantApps)
	slices.Sort(wantJobs)
	slices.Sort(wantStages)
	slices.Sort(wantSQL)
	slices.Sort(wantExecutors)
	slices.Sort(wantRemovals)

	// appname is a tag: one series per application, selected with the row.
	var gotApps []string
	for _, s := range srv.Query(t, "ann", `SELECT "status", "end_ms", "attempt_id" FROM "spark_app" GROUP BY "applicationid", "appname"`) {
		for _, v := range s.Values {
			gotApps = append(gotApps, fmt.Sprint(v[0], " ", s.Tags["applicationid"], " ", s.Tags["appname"], " ", v[1], " ", v[2], " ", v[3]))
		}
	}
	slices.Sort(gotApps)
	equalLines(t, "applications", gotApps, wantApps)
	equalLines(t, "jobs", rows(t, srv, "ann", "spark_job", "job_id", "status", "end_ms", "num_tasks", "num_completed_tasks", "num_failed_tasks", "failure_reason"), wantJobs)
	equalLines(t, "stages", rows(t, srv, "ann", "spark_stage", "stage_id", "stage_attempt", "status", "end_ms", "num_tasks", "num_failed_tasks", "executor_run_time_ms", "failure_reason"), wantStages)
	equalLines(t, "sql", rows(t, srv, "ann", "spark_sql", "execution_id", "status", "end_ms", "description"), wantSQL)
	var gotExecutors []string
	for _, r := range rows(t, srv, "ann", "spark_executor", "executor_id", "host", "status", "end_ms", "cores", "max_memory",
		"remove_reason", "peak_JVMHeapMemory") {
		_, r, _ = strings.Cut(r, " ") // the time it was read
		gotExecutors = append(gotExecutors, r)
	}
	slices.Sort(gotExecutors)
	equalLines(t, "executors", gotExecutors, wantExecutors)
	equalLines(t, "executor removals", rows(t, srv, "ann", "spark_executor_removal", "executor_id", "added_ms", "remove_reason"), wantRemovals)

	// Facts of Spark's own expectations for these logs.
	failed := rows(t, srv, "ann", "spark_job", "job_id", "status", "stage_ids", "failure_reason")
	if !slices.Contains(failed, nsText(factTime(1422981785829, 1, phaseEnd))+" local-1422981780767 1 FAILED 1,2 Job aborted due to stage failure: "+
		"Task 3 in stage 2.0 failed 1 times, most recent failure: Lost task 3.0 in stage 2.0 (TID 19, localhost): java.lang.RuntimeException: got a 3, failing") {
		t.Errorf("the failed job of local-1422981780767 (starting with its first stage, as its log has no job time):\n%s", strings.Join(failed, "\n"))
	}
	removals := rows(t, srv, "ann", "spark_executor_removal", "executor_id", "remove_reason")
	if !slices.ContainsFunc(removals, func(r string) bool {
		return strings.HasSuffix(r, " application_1628109047826_1317105 1 Container container_e18_1628109047826_1317105_01_000002 exited from explicit termination request.")
	}) {
		t.Errorf("the removal of executor 1 of application_1628109047826_1317105, with YARN's reason:\n%s", strings.Join(removals, "\n"))
	}
	peaks := rows(t, srv, "ann", "spark_executor", "executor_id", "peak_JVMHeapMemory", "peak_ProcessTreeJVMRSSMemory")
	if !slices.ContainsFunc(peaks, func(r string) bool {
		return strings.Contains(r, " application_1553914137147_0018 ") && !strings.HasSuffix(r, "<nil> <nil>")
	}) {
		t.Errorf("no peak memory metrics for application_1553914137147_0018:\n%s", strings.Join(peaks, "\n"))
	}
	if len(wantExecutors) < 40 || len(wantRemovals) < 6 {
		t.Errorf("fixtures give %d executors, %d removals", len(wantExecutors), len(wantRemovals))
	}
	if len(wantJobs) < 40 || len(wantStages) < 40 || len(wantSQL) < 7 || len(wantApps) != 21 {
		t.Errorf("fixtures give %d apps, %d jobs, %d stages, %d SQL executions", len(wantApps), len(wantJobs), len(wantStages), len(wantSQL))
	}
}

// The query a Grafana annotation sends (InfluxQL, with the dashboard's
// time range and application variable) returns each ended job as a region
// (its start, end, title and text) and each job seen running as a mark at
// its start.
func TestGrafanaAnnotationQuery(t *testing.T) {
	s := newScript(sparkui.LiveUI)
	srv := influxtest.Start(t)
	w := writerTo(t, srv, "spark")
	p := newPoller(t, Config{Sources: []string{serve(t, s.srv)}, Sink: w, Now: s.clk.Now})
	for _, step := range []func(){func() {}, s.step2, s.step3} {
		step()
		p.PollOnce(context.Background())
	}
	closeWriter(t, w)
	// The dashboard's range starts after job 0 began: the facts' range
	// reaches a day back (the query is the dashboard's, interpolated).
	q := fmt.Sprintf(`SELECT "title", "text", "end_ms", "status" FROM "spark_job" WHERE "applicationid" =~ /^%s$/ AND time >= %dms - 1d AND time <= %dms AND ("end_ms" >= %d OR "fact" = 'start')`,
		scriptApp, ms(at(20)), ms(at(3600)), ms(at(20)))
	res := srv.Query(t, "spark", q)
	if len(res) != 1 {
		t.Fatalf("%q: %v", q, res)
	}
	var got []string
	for _, v := range res[0].Values {
		got = append(got, fmt.Sprint(v...))
	}
	equalLines(t, "annotation rows (time title text end_ms status)", got, []string{
		fmt.Sprint(factNs(5, 0, phaseStart), "Job 0 RUNNING", "save at etl.py:40 · 12 tasks", nil, "RUNNING"),
		fmt.Sprint(factNs(5, 0, phaseEnd), "Job 0 SUCCEEDED", "save at etl.py:40 · 31s · 12 tasks", ms(at(36)), "SUCCEEDED"),
		fmt.Sprint(factNs(37, 1, phaseEnd), "Job 1 FAILED",
			"collect at etl.py:52 · 1s · 2 tasks, 1 failed · Job aborted due to stage failure: Task 1 in stage 2.0 failed 4 times", ms(at(38)), "FAILED"),
		fmt.Sprint(factNs(39, 2, phaseStart), "Job 2 RUNNING", "count at etl.py:60 · 3 tasks", nil, "RUNNING"),
		fmt.Sprint(factNs(39, 2, phaseEnd), "Job 2 SUCCEEDED", "count at etl.py:60 · 11s · 3 tasks", ms(at(50)), "SUCCEEDED"),
	})
	// A range inside job 0 (20 s to 30 s): its region overlaps it and is
	// drawn; job 1 and 2 began after it.
	q = fmt.Sprintf(`SELECT "title" FROM "spark_job" WHERE "applicationid" =~ /^%s$/ AND time >= %dms - 1d AND time <= %dms AND ("end_ms" >= %d OR "fact" = 'start')`,
		scriptApp, ms(at(20)), ms(at(30)), ms(at(20)))
	got = nil
	for _, s := range srv.Query(t, "spark", q) {
		for _, v := range s.Values {
			got = append(got, fmt.Sprint(v[1]))
		}
	}
	equalLines(t, "a range inside job 0", got, []string{"Job 0 RUNNING", "Job 0 SUCCEEDED"})
	// A range after job 0 ended leaves it out: its region does not
	// overlap.
	q = fmt.Sprintf(`SELECT "title" FROM "spark_job" WHERE "applicationid" =~ /^%s$/ AND "fact" = 'end' AND time >= %dms - 1d AND time <= %dms AND ("end_ms" >= %d OR "fact" = 'start')`,
		scriptApp, ms(at(37)), ms(at(38)), ms(at(37)))
	got = nil
	for _, s := range srv.Query(t, "spark", q) {
		for _, v := range s.Values {
			got = append(got, fmt.Sprint(v[1]))
		}
	}
	equalLines(t, "a range after job 0", got, []string{"Job 1 FAILED"})

	// Each kind is one series per application: no series per job.
	series := srv.Query(t, "spark", `SHOW SERIES`)
	var keys []string
	for _, s := range series {
		for _, v := range s.Values {
			keys = append(keys, fmt.Sprint(v[0]))
		}
	}
	slices.Sort(keys)
	equalLines(t, "series", keys, []string{
		"spark_app,applicationid=" + scriptApp + `,appname=Nightly\ ETL`,
		"spark_job,applicationid=" + scriptApp + `,appname=Nightly\ ETL`,
		"spark_sql,applicationid=" + scriptApp + `,appname=Nightly\ ETL`,
		"spark_stage,applicationid=" + scriptApp + `,appname=Nightly\ ETL`,
	})
}
