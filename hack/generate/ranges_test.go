package main

import (
	"strings"
	"testing"

	"github.com/graceguard/graceguard/pkg/flags"
)

// Every rule between flags reaches the chart, with its reason.
func TestEveryRelationIsCheckedByTheChart(t *testing.T) {
	tpl := relationsTemplate()
	for _, r := range flags.Relations {
		if !strings.Contains(tpl, r.Why+" (--"+r.Lesser+", --"+r.Greater+")") {
			t.Errorf("the chart's generated checks lack the rule --%s below --%s%s", r.Lesser, r.Greater, r.Why)
		}
	}
}
