package templates

import "sort"

// node is a node of the filter tree: one filter section at one depth.
type node struct {
	label   string
	lits    []*node // literal children, ascending by label
	star    *node   // the "*" child, if any
	tmpl    int     // template index, -1 for none
	creator int     // index of the template whose filter created the node
}

func (n *node) leaf() bool { return len(n.lits) == 0 && n.star == nil }

// lit returns the literal child labelled part, or nil.
func (n *node) lit(part []byte) *node {
	if len(n.lits) <= 8 { // equality tests beat ordered comparisons here
		for _, c := range n.lits {
			if c.label == string(part) {
				return c
			}
		}
		return nil
	}
	lo, hi := 0, len(n.lits)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if n.lits[m].label < string(part) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(n.lits) && n.lits[lo].label == string(part) {
		return n.lits[lo]
	}
	return nil
}

// insert adds a filter, as influxd does: missing nodes are created, a new
// "*" node takes its parent's template as it is at that moment, and the
// last node gets the template.
func (n *node) insert(sections []string, t int) {
	for _, s := range sections {
		var c *node
		if s == "*" {
			if n.star == nil {
				n.star = &node{label: s, tmpl: n.tmpl, creator: t}
			}
			c = n.star
		} else if c = n.lit([]byte(s)); c == nil {
			c = &node{label: s, tmpl: -1, creator: t}
			i := sort.Search(len(n.lits), func(i int) bool { return n.lits[i].label > s })
			n.lits = append(n.lits, nil)
			copy(n.lits[i+1:], n.lits[i:])
			n.lits[i] = c
		}
		n = c
	}
	n.tmpl = t
}

// step moves the search one path part down: to the literal child equal to
// part, else to the "*" child. It returns nil when neither exists, and then
// the search ends with n's template. There is no backtracking.
func (n *node) step(part []byte) *node {
	if c := n.lit(part); c != nil {
		return c
	}
	return n.star
}
