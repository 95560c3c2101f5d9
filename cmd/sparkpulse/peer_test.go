package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx/influxtest"
	"github.com/sparkpulse/sparkpulse/sparkui"
)

// With check-peer, a process's points arrive only from the address Spark
// lists for it: executor 1 (listed at 127.0.0.2) from 127.0.0.2, not from
// 127.0.0.1; executor 2, listed under a host name, and the driver, at
// 127.0.0.1, are not held back. The refusal is counted.
func TestCheckPeer(t *testing.T) {
	srv := influxtest.Start(t)
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	const app = "app-20261125100000-0001"
	m := &sparkui.Model{Apps: []*sparkui.App{{ID: app, Name: "peers", Attempts: []*sparkui.Attempt{{Start: start, User: "etl", SparkVersion: "3.5.3",
		Executors: []*sparkui.Executor{
			{ID: "driver", HostPort: "127.0.0.1:40000", Added: start},
			{ID: "1", HostPort: "127.0.0.2:40001", Cores: 2, Added: start},
			{ID: "2", HostPort: "node-2.cluster:40002", Cores: 2, Added: start},
		}}}}}}
	ui := httptest.NewServer(sparkui.NewServer(sparkui.HistoryServer, m))
	defer ui.Close()
	svc := startSparkpulse(t, config.Config{
		InfluxDB: config.InfluxDBConfig{URL: srv.URL},
		Annotate: config.AnnotateConfig{URLs: []string{ui.URL}, Interval: seconds(3600)}, // polled below
		Graphite: []config.GraphiteConfig{{Database: "spark", CheckPeer: true}},
	})
	svc.annotator.PollOnce(context.Background()) // where Spark lists the processes

	ts := time.Now().Unix()
	sendFrom(t, "127.0.0.1", svc.addr(0), fmt.Sprintf("%[1]s.1.jvm.heap.used 11 %[2]d\n%[1]s.2.jvm.heap.used 22 %[2]d\n%[1]s.driver.jvm.heap.used 33 %[2]d\n", app, ts))
	sendFrom(t, "127.0.0.2", svc.addr(0), fmt.Sprintf("%s.1.jvm.heap.used 12 %d\n", app, ts+1))
	svc.flush()

	var got []string
	for _, s := range srv.Query(t, "spark", `SELECT "heap.used" FROM "jvm" GROUP BY "process"`) {
		for _, v := range s.Values {
			got = append(got, fmt.Sprintf("%s=%v", s.Tags["process"], v[1]))
		}
	}
	sort.Strings(got)
	if want := "[1=12 2=22 driver=33]"; fmt.Sprint(got) != want {
		t.Errorf("stored %v, want %s", got, want)
	}
	if n := svc.blocks[0].relay.Stats().Dropped[relayReason(t, "peer")].Load(); n != 1 {
		t.Errorf("%d lines dropped for their sender, want 1", n)
	}
}

// sendFrom sends payload over TCP from the loopback address from, and
// waits until sparkpulse has taken every line.
func sendFrom(t *testing.T, from, addr, payload string) {
	t.Helper()
	var d net.Dialer
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(payload)); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("waiting for sparkpulse to close the connection: %v", err)
	}
}
