package influx

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// A Querier's statements share its connections: a reader that runs many
// (the accounting, the live view) opens one, not one per statement.
func TestQuerierReusesConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":[[0,1]]}]}]}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	q, err := NewQuerier(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for range 5 {
		series, err := q.Query(context.Background(), "db", `SELECT "v" FROM "m"`)
		if err != nil || len(series) != 1 || series[0].Name != "m" {
			t.Fatalf("%v, %v", series, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 statements opened %d connections, want 1", n)
	}
}

// A kept-alive connection the server closed while idle costs a read
// nothing: it is sent again on a fresh one. A write through /query
// (CREATE, SELECT … INTO) is not, since it may have been done.
func TestQuerierReadSurvivesAClosedConnection(t *testing.T) {
	for _, c := range []struct {
		statement string
		ok        bool
	}{
		{`SELECT "v" FROM "m"`, true},
		{`show databases`, true},
		{`SELECT "v" INTO "n" FROM "m"`, false},
		{`CREATE DATABASE "db"`, false},
	} {
		var served atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if served.Add(1) == 2 {
				// The second request on the kept-alive connection: the
				// server had closed it, so it is cut without an answer.
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"results":[{"statement_id":0,"series":[{"name":"m","columns":["time","v"],"values":[[0,1]]}]}]}`))
		}))
		q, err := NewQuerier(Config{URL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		var errs [2]error
		for i := range errs {
			_, errs[i] = q.Query(context.Background(), "db", c.statement)
		}
		q.Close()
		srv.Close()
		if errs[0] != nil {
			t.Fatalf("%s: first: %v", c.statement, errs[0])
		}
		if got := errs[1] == nil; got != c.ok {
			t.Errorf("%s: second on a closed connection: %v, want ok %v", c.statement, errs[1], c.ok)
		}
	}
}
