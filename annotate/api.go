package annotate

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// appStateKey carries, in a sync's context, the attempt being read: get
// notes there the values of its answers it read as absent.
type appStateKey struct{}

// optMS is an optional date in epoch ms, 0 when absent.
func optMS(d *sparkapi.Date) int64 { return d.Ms() }

// formatQueryDate writes a time as the REST API's date parameters take it.
func formatQueryDate(ms int64) string { return time.UnixMilli(ms).UTC().Format(sparkapi.DateLayout) }

// Failure kinds, the label of the error counter: the client's
// (sparkapi.Error), and the annotator's own.
const (
	kindNetwork = sparkapi.KindNetwork
	kindStatus  = sparkapi.KindStatus
	kindDecode  = sparkapi.KindDecode
	// kindWrongApp: a template instance answered for an application other
	// than the one it was asked about; refused, so that no source speaks
	// for another application.
	kindWrongApp = "wrong_app"
)

// errorKind is the kind err is counted under: a request that failed
// without a kind counts as a network failure.
func errorKind(err error) string {
	var fe *sparkapi.Error
	if errors.As(err, &fe) {
		return fe.Kind
	}
	return kindNetwork
}

// newClient makes the client of Spark's REST API that cfg describes.
func newClient(cfg Config) *sparkapi.Client {
	return sparkapi.NewClient(sparkapi.ClientConfig{Transport: cfg.Transport, Auth: cfg.Auth, Timeout: cfg.Timeout,
		MaxResponseBytes: cfg.MaxResponseBytes, Now: cfg.Now})
}

// get fetches url with the poller's client (sparkapi.Client.Get) and
// decodes its JSON into out. The values of an answer that no Spark writes,
// read as absent, are counted, noted in the sync's context (appStateKey)
// and logged.
func (p *Poller) get(ctx context.Context, url string, out any) error {
	bad, err := p.client.Get(ctx, url, out)
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		p.stats.invalid.Add(uint64(len(bad)))
		if st, ok := ctx.Value(appStateKey{}).(*appState); ok {
			st.invalid += len(bad)
			if len(st.invalidSeen) < 5 {
				st.invalidSeen = append(st.invalidSeen, bad[:min(len(bad), 5-len(st.invalidSeen))]...)
			}
		}
		// At most once a minute: a hostile UI answers every poll.
		now := p.cfg.Now().Unix()
		if last := p.stats.invalidLogged.Load(); now-last >= 60 && p.stats.invalidLogged.CompareAndSwap(last, now) {
			p.log.Warn("Spark REST answer with values no Spark writes: read as absent", zap.String("url", url),
				zap.Int("values", len(bad)), zap.Strings("first", bad[:min(len(bad), 5)]))
		}
	}
	return nil
}

// Auth is how requests to Spark authenticate (sparkapi.Auth).
type Auth = sparkapi.Auth
