package influx

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"time"
)

// Gzip says whether write requests are gzip-compressed.
type Gzip string

// The settings. The zero value is GzipAuto.
const (
	// GzipAuto sends plain bodies to an InfluxDB on a loopback or private
	// address — the same machine or a LAN, where, measured on loopback,
	// compressing costs sparkpulse and influxd more CPU per point than the
	// bytes it saves are worth — and compresses for any other address, or
	// a name that does not resolve: a WAN or a cloud endpoint, where bytes
	// cost (line protocol of Spark's metrics shrinks about 13-fold).
	GzipAuto Gzip = ""
	GzipOn   Gzip = "on"
	GzipOff  Gzip = "off"
)

// ParseGzip reads the config's gzip setting: true, false or "auto".
func ParseGzip(v any) (Gzip, error) {
	switch v {
	case true, "true", "on":
		return GzipOn, nil
	case false, "false", "off":
		return GzipOff, nil
	case nil, "", "auto":
		return GzipAuto, nil
	}
	return "", fmt.Errorf("gzip %v: must be true, false or \"auto\"", v)
}

// String is the setting as the config writes it.
func (g Gzip) String() string {
	switch g {
	case GzipOn:
		return "true"
	case GzipOff:
		return "false"
	}
	return "auto"
}

// Enabled decides whether requests to the InfluxDB at rawURL are
// compressed, resolving GzipAuto.
func (g Gzip) Enabled(rawURL string) bool {
	switch g {
	case GzipOn:
		return true
	case GzipOff:
		return false
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return true
	}
	return !nearby(u.Hostname())
}

// nearby reports whether every address of host is loopback, private or
// link-local.
func nearby(host string) bool {
	if host == "localhost" {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return local(ip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !local(ip) {
			return false
		}
	}
	return true
}

func local(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast()
}
