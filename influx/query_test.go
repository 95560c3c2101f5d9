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
