package annotate

import (
	"cmp"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
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
	// version moves whenever an answer of PeerAllowed may have changed:
	// a process listed, moved or dropped, an application forgotten.
	version atomic.Uint64
}

type appAddrs struct {
	seen  time.Time
	procs map[string]netip.Addr
}

// note records where the attempt's processes run, after a read.
func (b *addrBook) note(st *appState, now time.Time) {
	key := cmp.Or(st.MetricsKey, st.Key.App)
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
	changed := false
	for id, x := range st.Executors {
		host, _, err := net.SplitHostPort(x.HostPort)
		if err != nil {
			host = x.HostPort
		}
		old, had := a.procs[id]
		if ip, err := netip.ParseAddr(host); err == nil {
			a.procs[id] = ip.Unmap()
			changed = changed || !had || old != ip.Unmap()
		} else if had {
			delete(a.procs, id)
			changed = true
		}
	}
	if changed {
		b.version.Add(1)
	}
}

// forget drops the applications not read since before t.
func (b *addrBook) forget(before time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, a := range b.apps {
		if a.seen.Before(before) {
			delete(b.apps, k)
			b.version.Add(1)
		}
	}
}

// PeerVersion moves whenever an answer of PeerAllowed may have changed,
// so that a connection that was allowed before a process was listed is
// asked again.
func (p *Poller) PeerVersion() uint64 { return p.addrs.version.Load() }

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
