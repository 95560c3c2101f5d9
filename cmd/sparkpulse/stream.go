package main

import (
	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/config"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/streamread"
)

// newStream is the stream of plan's [[graphite]] blocks (package
// streamread), or nil (no accounting from the stream) without one.
func newStream(plan *config.Plan, writers func() []*influx.Writer) annotate.Stream {
	dbs := streamDBs(plan)
	if len(dbs) == 0 {
		return nil
	}
	s, err := streamread.New(plan.Influx, dbs, writers)
	if err != nil {
		return nil // the plan's InfluxDB settings were validated: not reached
	}
	return s
}

// streamDBs are the databases plan's [[graphite]] blocks write, each with
// the shapes it may hold (streamread.Databases).
func streamDBs(plan *config.Plan) []streamread.Database {
	blocks := make([]streamread.Block, 0, len(plan.Listeners))
	for _, l := range plan.Listeners {
		blocks = append(blocks, streamread.Block{Bucket: l.Target.Bucket, Templates: l.Templates != nil,
			Schema: l.Schema, SchemaSet: l.Config.Schema != ""})
	}
	return streamread.Databases(blocks)
}
