package influxtest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// GraphiteAddrs waits until influxd's n [[graphite]] listeners (WithGraphite)
// are open, and returns their bound addresses (host:port) in the order of
// the configuration, in which influxd opens them. influxd logs each as it
// opens it, in logfmt:
//
//	lvl=info msg=Listening log_id=… service=graphite addr=127.0.0.1:0 protocol=tcp addr=127.0.0.1:45127
//
// the first addr being the configured one, the last the bound one. It
// fails the test when influxd exits, or has not opened them all within
// startTimeout.
func (s *Server) GraphiteAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	if !s.info {
		tb.Fatal("influxtest: GraphiteAddrs needs the server started WithGraphite: influxd logs its listeners' addresses at level info only")
	}
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	for {
		out, more := s.log.From(s.logFrom)
		addrs := graphiteListening(out)
		if len(addrs) >= n {
			return addrs[:n]
		}
		select {
		case <-more:
		case <-s.exited:
			tb.Fatalf("influxtest: influxd exited with %d of %d graphite listeners open: %v", len(addrs), n, s.cmd.ProcessState)
		case <-deadline.C:
			tb.Fatalf("influxtest: %d of %d graphite listeners open after %s: %v", len(addrs), n, startTimeout, addrs)
		}
	}
}

// graphiteListening returns the bound addresses of influxd's log lines
// that say a graphite listener is open, in order. A last line without
// its newline is not read yet.
func graphiteListening(log string) []string {
	var addrs []string
	lines := strings.Split(log, "\n")
	for _, l := range lines[:len(lines)-1] {
		f := logfmt(l)
		var msg, service, addr string
		for _, kv := range f {
			switch kv[0] {
			case "msg":
				msg = kv[1]
			case "service":
				service = kv[1]
			case "addr":
				addr = kv[1] // the last: the configured address comes first
			}
		}
		if msg == "Listening" && service == "graphite" && addr != "" {
			addrs = append(addrs, addr)
		}
	}
	return addrs
}

// logfmt splits a logfmt line into its key=value pairs, in order, keys
// repeated as they are; quoted values are unquoted. A line that is not
// logfmt gives what could be read of it.
func logfmt(line string) [][2]string {
	var out [][2]string
	for {
		line = strings.TrimLeft(line, " ")
		k, rest, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			return out
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return out
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		out = append(out, [2]string{k, v})
		line = rest
	}
}
