package certs

import (
	"net/http"
	"testing"
)

type recorder struct{ got *http.Request }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = req
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

// The rotator's lists and watches name the one object each, so RBAC can
// allow them by resourceNames; every other request goes out unchanged.
func TestNameSelectorNarrowsOnlyTheRotatorsCollections(t *testing.T) {
	names := map[string]string{
		"/api/v1/namespaces/gg/secrets":                                       "gg-certs",
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations": "gg",
	}
	for _, tc := range []struct {
		name, method, url, want string
	}{
		{"a list of the namespace's Secrets names the Secret", "GET", "https://api/api/v1/namespaces/gg/secrets?limit=500",
			"https://api/api/v1/namespaces/gg/secrets?fieldSelector=metadata.name%3Dgg-certs&limit=500"},
		{"a watch keeps its parameters", "GET", "https://api/api/v1/namespaces/gg/secrets?watch=true&resourceVersion=7",
			"https://api/api/v1/namespaces/gg/secrets?fieldSelector=metadata.name%3Dgg-certs&resourceVersion=7&watch=true"},
		{"a selector already there is kept and narrowed", "GET", "https://api/api/v1/namespaces/gg/secrets?fieldSelector=type%3DOpaque",
			"https://api/api/v1/namespaces/gg/secrets?fieldSelector=type%3DOpaque%2Cmetadata.name%3Dgg-certs"},
		{"a cluster-scoped collection", "GET", "https://api/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
			"https://api/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations?fieldSelector=metadata.name%3Dgg"},
		{"a get by name is left alone", "GET", "https://api/api/v1/namespaces/gg/secrets/gg-certs",
			"https://api/api/v1/namespaces/gg/secrets/gg-certs"},
		{"an update is left alone", "PUT", "https://api/api/v1/namespaces/gg/secrets",
			"https://api/api/v1/namespaces/gg/secrets"},
		{"another namespace's Secrets are left alone", "GET", "https://api/api/v1/namespaces/other/secrets",
			"https://api/api/v1/namespaces/other/secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			req, err := http.NewRequest(tc.method, tc.url, http.NoBody)
			if err != nil {
				t.Fatal(err)
			}
			orig := req.URL.String()
			if _, err := (nameSelector{rt: rec, names: names}).RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if got := rec.got.URL.String(); got != tc.want {
				t.Errorf("sent %s\nwant %s", got, tc.want)
			}
			if req.URL.String() != orig {
				t.Errorf("the caller's request was changed to %s", req.URL)
			}
		})
	}
}
