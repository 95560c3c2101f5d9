package annotate

import (
	"cmp"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Where each process runs, for the Graphite listeners' peer check
// ([Poller.PeerAllowed], `[[graphite]] check-peer`). Spark's executor list
// gives each process's hostPort as it registered: an IP address on
// Kubernetes (the pod's) and wherever spark.driver.host or
// SPARK_LOCAL_IP is an address; a host name on YARN and most standalone
// clusters. Only addresses are kept: a name would have to be resolved,
// and a hostile UI must not choose what sparkpulse looks up. A process
// listed under a name, or not listed (yet), is not checked.

// addrBook is, by the key an application's metrics carry and process, the
// IP address Spark lists for the process.
type addrBook struct {
	mu   sync.RWMutex
	apps map[string]*appAddrs
}

type appAddrs struct {
	seen  time.Time
	procs map[string]netip.Addr
}

// note records where the attempt's processes run, after a read.
func (b *addrBook) note(st *appState, now time.Time) {
	key := cmp.Or(st.metricsKey, st.key.app)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.apps == nil {
		b.apps = map[string]*appAddrs{}
	}
	a := b.apps[key]
	if a == nil {
		a = &appAddrs{procs: map[string]netip.Addr{}}
		b.apps[key] = a
	}
	a.seen = now
	for id, x := range st.executors {
		host, _, err := net.SplitHostPort(x.HostPort)
		if err != nil {
			host = x.HostPort
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			a.procs[id] = ip.Unmap()
		} else {
			delete(a.procs, id)
		}
	}
}

// forget drops the applications not read since before t.
func (b *addrBook) forget(before time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, a := range b.apps {
		if a.seen.Before(before) {
			delete(b.apps, k)
		}
	}
}

// PeerAllowed reports whether a TCP connection from peer may carry the
// points of an application's process (app is the key its metrics carry):
// false only when Spark lists that process at an IP address and peer is
// another one.
func (p *Poller) PeerAllowed(app, process string, peer netip.Addr) bool {
	b := &p.addrs
	b.mu.RLock()
	defer b.mu.RUnlock()
	a := b.apps[app]
	if a == nil {
		return true
	}
	want, ok := a.procs[process]
	return !ok || want == peer.Unmap()
}
