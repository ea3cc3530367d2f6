package certs

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// narrowedManager is mgr with a REST config whose list and watch requests
// for the rotator's objects name the one object each: cert-controller's
// informers list every Secret of the namespace and every webhook
// configuration of the cluster, which RBAC can only allow by resource, not
// by name. With a metadata.name field selector on the request, the API
// server authorizes it against resourceNames (its request info takes the
// name from the selector), so graceguard's Role reads one Secret and its
// ClusterRole two webhook configurations, nothing else.
type narrowedManager struct {
	manager.Manager
	cfg *rest.Config
}

func (m narrowedManager) GetConfig() *rest.Config { return m.cfg }

// narrow returns mgr whose GetConfig carries the selectors.
func narrow(mgr manager.Manager, cfg Config) manager.Manager {
	c := rest.CopyConfig(mgr.GetConfig())
	names := map[string]string{
		"/api/v1/namespaces/" + cfg.Namespace + "/secrets":                      cfg.SecretName,
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations":   cfg.MutatingWebhookConfiguration,
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": cfg.ValidatingWebhookConfiguration,
	}
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return nameSelector{rt: rt, names: names} })
	return narrowedManager{Manager: mgr, cfg: c}
}

// nameSelector adds metadata.name=NAME to GET requests on the collections
// in names (lists and watches), and leaves everything else alone.
type nameSelector struct {
	rt    http.RoundTripper
	names map[string]string // collection path -> object name
}

func (n nameSelector) RoundTrip(req *http.Request) (*http.Response, error) {
	name, ok := n.names[strings.TrimSuffix(req.URL.Path, "/")]
	if !ok || req.Method != http.MethodGet {
		return n.rt.RoundTrip(req)
	}
	q := req.URL.Query()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	if have := q.Get("fieldSelector"); have != "" {
		sel = have + "," + sel
	}
	q.Set("fieldSelector", sel)
	// A RoundTripper must not change the request it is given.
	out := req.Clone(req.Context())
	out.URL.RawQuery = q.Encode()
	return n.rt.RoundTrip(out)
}
