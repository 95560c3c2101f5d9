package influxtest

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// influxd names the ports it bound in its log only, at level info, in
// logfmt. For influxd 1.x, the configured address comes first and the bound
// one last, under the same key:
//
//	lvl=info msg="Listening on HTTP" log_id=… service=httpd addr=127.0.0.1:40325 https=false
//	lvl=info msg=Listening log_id=… service=graphite addr=127.0.0.1:0 protocol=tcp addr=127.0.0.1:45127
//
// and influxd 2.x gives the bound port on its own:
//
//	lvl=info msg=Listening log_id=… service=tcp-listener transport=http addr=127.0.0.1:0 port=34007
//
// So the servers are configured with port 0 and their addresses are read
// from these lines, as they are written.

// A listenLine is what marks one kind of listener's line in influxd's log,
// and the key of the bound address (its last value) or port.
type listenLine struct {
	msg, service, key string
	portOnly          bool // the value is a port on 127.0.0.1
}

var (
	httpListening     = listenLine{msg: "Listening on HTTP", service: "httpd", key: "addr"}
	graphiteListening = listenLine{msg: "Listening", service: "graphite", key: "addr"}
	http2Listening    = listenLine{msg: "Listening", service: "tcp-listener", key: "port", portOnly: true}
)

// find returns the bound addresses (host:port) of the log lines that say
// such a listener is open, in order. A last line without its newline is
// not read yet.
func (ll listenLine) find(log string) []string {
	var addrs []string
	lines := strings.Split(log, "\n")
	for _, l := range lines[:len(lines)-1] {
		var msg, service, addr string
		for _, kv := range logfmt(l) {
			switch kv[0] {
			case "msg":
				msg = kv[1]
			case "service":
				service = kv[1]
			case ll.key:
				addr = kv[1] // the last: the configured address comes first
			}
		}
		if msg != ll.msg || service != ll.service || addr == "" {
			continue
		}
		if ll.portOnly {
			addr = "127.0.0.1:" + addr
		}
		addrs = append(addrs, addr)
	}
	return addrs
}

// await waits until log, from offset from on (where the output of the
// running process cmd starts), has n such lines, and returns their
// addresses. It fails when the process exits first (closing exited) or
// after startTimeout, with the addresses found so far.
func (ll listenLine) await(log *Output, from int, cmd *exec.Cmd, exited <-chan struct{}, n int) ([]string, error) {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	for {
		out, more := log.From(from)
		addrs := ll.find(out)
		if len(addrs) >= n {
			return addrs[:n], nil
		}
		select {
		case <-more:
		case <-exited:
			return addrs, fmt.Errorf("influxd exited with %d of %d listeners open: %v", len(addrs), n, cmd.ProcessState)
		case <-deadline.C:
			return addrs, fmt.Errorf("%d of %d listeners open after %s: %v", len(addrs), n, startTimeout, addrs)
		}
	}
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
