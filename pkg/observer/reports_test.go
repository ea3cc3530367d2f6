package observer

import (
	"errors"
	"testing"

	"github.com/graceguard/graceguard/pkg/policyreport"
)

func TestTheReportKindIsWhatTheAPIServerServes(t *testing.T) {
	or, pr := policyreport.OpenReports, policyreport.PolicyReport
	both := map[policyreport.Kind]bool{or: true, pr: true}
	for _, tc := range []struct {
		name   string
		want   string
		served map[policyreport.Kind]bool
		kind   policyreport.Kind
		err    string
	}{
		{"auto prefers OpenReports, PolicyReport's successor", ReportsAuto, both, or, ""},
		{"auto takes PolicyReport when it alone is served", ReportsAuto, map[policyreport.Kind]bool{pr: true}, pr, ""},
		{"auto with neither writes nothing, and says why without blaming the flag", ReportsAuto, nil, "",
			"the API server serves neither openreports.io/v1alpha1 Report nor wgpolicyk8s.io/v1alpha2 PolicyReport: no policy reports are written until one's CRD is installed (asked again every --reports-interval)"},
		{"a kind asked for by name, served", string(pr), both, pr, ""},
		{"a kind asked for by name, not served: the error names it and what is served", string(pr), map[policyreport.Kind]bool{or: true}, "",
			"--reports=policyreport: the API server does not serve wgpolicyk8s.io/v1alpha2 PolicyReport (its CRD is not installed); it serves openreports.io/v1alpha1 Report: install the CRD, or set --reports=auto"},
		{"a kind asked for by name, nothing served", string(or), map[policyreport.Kind]bool{}, "",
			"--reports=openreports: the API server does not serve openreports.io/v1alpha1 Report (its CRD is not installed); it serves neither openreports.io/v1alpha1 Report nor wgpolicyk8s.io/v1alpha2 PolicyReport: install the CRD, or set --reports=auto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := pickKind(tc.want, tc.served)
			if k != tc.kind || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
				t.Errorf("pickKind(%s) = %q, %v; want %q, %s", tc.want, k, err, tc.kind, tc.err)
			}
			var none noneServed
			if errors.As(err, &none) != (tc.want == ReportsAuto && tc.kind == "") {
				t.Errorf("%v: only auto with nothing served is the quiet case", err)
			}
		})
	}
}

func TestTheTreatedNamespacesAreListedInOrderWithoutTheExcluded(t *testing.T) {
	n := newNamespaces([]string{"kube-system"})
	for _, ns := range []string{"shop", "kube-system", "api"} {
		n.optedIn[ns] = struct{}{}
	}
	if got := n.names(); len(got) != 2 || got[0] != "api" || got[1] != "shop" {
		t.Errorf("names() = %v, want [api shop]", got)
	}
}
