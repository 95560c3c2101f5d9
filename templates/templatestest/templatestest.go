// Package templatestest holds what the tests of templates and of the
// mappings built on it share.
package templatestest

import (
	"strings"

	"github.com/sparkpulse/sparkpulse/templates"
)

// Format renders a mapped point as measurement|k=v,k=v|field.
func Format(r *templates.Result) string {
	var b strings.Builder
	b.Write(r.Measurement)
	b.WriteByte('|')
	for i, t := range r.Tags {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(t.Key)
		b.WriteByte('=')
		b.Write(t.Value)
	}
	b.WriteByte('|')
	b.Write(r.Field)
	return b.String()
}
