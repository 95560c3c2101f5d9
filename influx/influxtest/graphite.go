package influxtest

import "testing"

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
	addrs, err := graphiteListening.await(s.log, s.logFrom, s.cmd, s.exited, n)
	if err != nil {
		tb.Fatalf("influxtest: graphite: %v", err)
	}
	return addrs
}
