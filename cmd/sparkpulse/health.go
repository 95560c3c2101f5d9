package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparkpulse/sparkpulse/config"
)

// healthTimeout bounds `sparkpulse health`, as a container's health check
// must be.
const healthTimeout = 3 * time.Second

func newHealthCmd(getenv func(string) string) *cobra.Command {
	var o config.Overrides
	var adminURL string
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 when sparkpulse's admin endpoint answers GET /healthz with 200, 1 otherwise",
		Long: `Exit 0 when sparkpulse's admin endpoint answers GET /healthz with 200 within 3s,
1 otherwise, with a one-line reason: a health check for a container image
without a shell or curl.

The endpoint is --admin-url, else the service's own [admin] bind-address, read
from the same config file (--config or SPARKPULSE_CONFIG) and environment
(SPARKPULSE_ADMIN_BIND_ADDRESS) as run; an address that binds every interface
(0.0.0.0, [::] or no host) is probed on 127.0.0.1.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u := adminURL
			if u == "" {
				addr, from, err := config.AdminAddr(&o, getenv)
				if err != nil {
					return err
				}
				if addr == "" {
					return fmt.Errorf("the admin endpoint is off (%s: [admin] bind-address is empty): nothing to probe", from)
				}
				u = probeURL(addr)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), healthTimeout)
			defer cancel()
			return checkHealth(ctx, u, cmd.OutOrStdout())
		},
	}
	addConfigFlag(cmd, &o)
	cmd.Flags().StringVar(&adminURL, "admin-url", "", "admin endpoint `URL` to probe, e.g. http://127.0.0.1:2033 (default: from [admin] bind-address or "+config.EnvAdminBind+")")
	return cmd
}

// probeURL is the URL that reaches an admin endpoint bound to addr: one
// bound to every interface is reached on the loopback.
func probeURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	switch host {
	case "", "0.0.0.0", "::", "[::]":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// normalizeAdminURL takes "host:port" or a URL, and returns the base URL
// of the admin endpoint; "" stays "".
func normalizeAdminURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%w: --admin-url %q: want http://host:port", errUsage, s)
	}
	return strings.TrimSuffix(strings.TrimSuffix(u.String(), "/healthz"), "/"), nil
}

// checkHealth asks base/healthz and says what it answered, in one line.
func checkHealth(ctx context.Context, base string, stdout io.Writer) error {
	base, err := normalizeAdminURL(base)
	if err != nil {
		return err
	}
	target := base + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("unhealthy: %s: no answer within %s", target, healthTimeout)
		}
		return fmt.Errorf("unhealthy: %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode != http.StatusOK {
		why := strings.Join(strings.Fields(string(body)), " ")
		if why != "" {
			why = ": " + why
		}
		return fmt.Errorf("unhealthy: %s answered %s%s", target, resp.Status, why)
	}
	fmt.Fprintf(stdout, "healthy: %s answered %s\n", target, resp.Status)
	return nil
}
