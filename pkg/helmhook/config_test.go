package helmhook

import (
	"strings"
	"testing"
	"time"
)

func TestConfigsNameTheFlagAtFault(t *testing.T) {
	service := SelftestConfig{Check: CheckService, Namespace: "graceguard-system", MutatingWebhookConfiguration: "graceguard",
		ValidatingWebhookConfiguration: "graceguard", Timeout: time.Minute}
	mutation := SelftestConfig{Check: CheckMutation, TestNamespace: "graceguard-test", Image: "registry.local/graceguard:v1", Timeout: time.Minute}
	unregister := UnregisterConfig{Release: "graceguard", Namespace: "graceguard-system", MutatingWebhookConfiguration: "graceguard",
		ValidatingWebhookConfiguration: "graceguard", Timeout: time.Minute}
	for _, tc := range []struct {
		name string
		err  error
		want []string // nil: valid
	}{
		{"the service check with what the chart renders", service.Validate(), nil},
		{"the mutation check with what the chart renders", mutation.Validate(), nil},
		{"unregister with what the chart renders", unregister.Validate(), nil},
		{"the service check does not need the mutation check's flags", func() error { c := service; c.Image = ""; return c.Validate() }(), nil},
		{"the service check without its namespace", func() error { c := service; c.Namespace = ""; return c.Validate() }(),
			[]string{"--namespace: required: the release namespace, whose objects the reviews are of (default $POD_NAMESPACE)"}},
		{"the service check without its configurations", func() error {
			c := service
			c.MutatingWebhookConfiguration, c.ValidatingWebhookConfiguration = "", "Bad_Name"
			return c.Validate()
		}(), []string{"--mutating-webhook-configuration: required: the release's, whose webhooks are called", "--validating-webhook-configuration=Bad_Name: a lowercase RFC 1123 subdomain"}},
		{"the mutation check without a namespace or an image", func() error { c := mutation; c.TestNamespace, c.Image = "", ""; return c.Validate() }(),
			[]string{"--test-namespace: required: a namespace labelled graceguard.io/inject=enabled", "--image: required: the dry-run Pod's image"}},
		{"a timeout out of range", func() error { c := mutation; c.Timeout = 10 * time.Minute; return c.Validate() }(),
			[]string{"--timeout=10m0s: want 1s to 5m"}},
		{"an unknown check", func() error { c := service; c.Check = "dns"; return c.Validate() }(),
			[]string{"--check=dns: want one of service, mutation"}},
		{"unregister without a release", func() error { c := unregister; c.Release = ""; return c.Validate() }(),
			[]string{"--release: required: the Helm release that owns the webhook configurations"}},
		{"unregister with a release name Helm refuses", func() error { c := unregister; c.Release = strings.Repeat("a", 54); return c.Validate() }(),
			[]string{"--release=" + strings.Repeat("a", 54) + ": must be no more than 53 characters (Helm's limit), not 54"}},
		{"unregister without its namespace", func() error { c := unregister; c.Namespace = ""; return c.Validate() }(),
			[]string{"--namespace: required: the release's namespace (default $POD_NAMESPACE)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				if tc.err != nil {
					t.Fatalf("want valid, got %v", tc.err)
				}
				return
			}
			if tc.err == nil {
				t.Fatalf("want errors %q, got none", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(tc.err.Error(), w) {
					t.Errorf("error %q does not say %q", tc.err, w)
				}
			}
		})
	}
}

func TestDefaultsTakeTheNamespaceFromThePod(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "gg")
	if s, u := DefaultSelftest(), DefaultUnregister(); s.Namespace != "gg" || u.Namespace != "gg" || s.Timeout != DefaultTimeout || u.Timeout != DefaultTimeout {
		t.Errorf("defaults %+v, %+v", s, u)
	}
}
