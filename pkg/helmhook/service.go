package helmhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// target is one webhook of a configuration, as the API server calls it.
type target struct {
	config  string // "MutatingWebhookConfiguration graceguard"
	name    string // "mutate-pods.graceguard.io"
	client  admissionregistrationv1.WebhookClientConfig
	rules   []admissionregistrationv1.RuleWithOperations
	timeout *int32
}

// checkService calls every webhook of both configurations and returns a
// line per webhook that answered; the first that did not is the error.
func checkService(ctx context.Context, c SelftestConfig, kube kubernetes.Interface) ([]string, error) {
	var targets []target
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, c.MutatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", c.MutatingWebhookConfiguration, err)
	}
	for _, w := range m.Webhooks {
		targets = append(targets, target{"MutatingWebhookConfiguration " + m.Name, w.Name, w.ClientConfig, w.Rules, w.TimeoutSeconds})
	}
	v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, c.ValidatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", c.ValidatingWebhookConfiguration, err)
	}
	for _, w := range v.Webhooks {
		targets = append(targets, target{"ValidatingWebhookConfiguration " + v.Name, w.Name, w.ClientConfig, w.Rules, w.TimeoutSeconds})
	}
	lines := make([]string, 0, len(targets))
	for _, t := range targets {
		line, err := call(ctx, t, c.Namespace)
		if err != nil {
			return nil, fmt.Errorf("webhook %s (%s): %w", t.name, t.config, err)
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("MutatingWebhookConfiguration %s and ValidatingWebhookConfiguration %s hold no webhook", m.Name, v.Name)
	}
	return lines, nil
}

// call sends t one AdmissionReview the way the API server would: to the
// address its client config names, trusting its caBundle only, within its
// timeoutSeconds (also passed as ?timeout=, as the API server does).
func call(ctx context.Context, t target, namespace string) (string, error) {
	u, serverName, err := endpoint(t.client)
	if err != nil {
		return "", err
	}
	if len(bytes.TrimSpace(t.client.CABundle)) == 0 {
		return "", errors.New("its caBundle is empty: the serving CA is not injected yet (self-managed: the replicas write it once they run; cert-manager: cainjector does)")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(t.client.CABundle) {
		return "", errors.New("its caBundle holds no PEM certificate")
	}
	review, err := newReview(t.rules, namespace)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(review)
	if err != nil {
		return "", err
	}
	timeout := 10 * time.Second // the API server's default timeoutSeconds
	if t.timeout != nil {
		timeout = time.Duration(*t.timeout) * time.Second
	}
	q := u.Query()
	q.Set("timeout", strconv.Itoa(int(timeout.Seconds()))+"s")
	withTimeout := *u
	withTimeout.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, withTimeout.String(), bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	// A proxy from the environment (HTTPS_PROXY, NO_PROXY) is used, as
	// client-go does; no other trust than the caBundle.
	transport := &http.Transport{
		Proxy:             http.ProxyFromEnvironment,
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}
	defer transport.CloseIdleConnections()
	start := time.Now()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		var ue *url.Error // names the method and URL again, with ?timeout=
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("POST %s: %w", u, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("POST %s: reading the answer: %w", u, err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: HTTP %d: %s", u, resp.StatusCode, clip(got))
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(got, &answer); err != nil {
		return "", fmt.Errorf("POST %s: the answer is no AdmissionReview: %v: %s", u, err, clip(got))
	}
	if answer.Response == nil || answer.Response.UID != review.Request.UID {
		return "", fmt.Errorf("POST %s: the AdmissionReview answers no request %s: %s", u, review.Request.UID, clip(got))
	}
	verdict := "allowed"
	if !answer.Response.Allowed {
		verdict = "denied"
		if r := answer.Response.Result; r != nil {
			verdict = fmt.Sprintf("denied (%d: %s)", r.Code, r.Message)
		}
	}
	return fmt.Sprintf("%s: %s answered a %s review %s in %s", t.name, u, review.Request.Kind.Kind, verdict, took.Round(time.Millisecond)), nil
}

// endpoint is the URL the API server calls for cc and the name it checks
// the serving certificate for: a Service is https://NAME.NAMESPACE.svc:PORT.
func endpoint(cc admissionregistrationv1.WebhookClientConfig) (*url.URL, string, error) {
	switch {
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return nil, "", fmt.Errorf("its url %q: %w", *cc.URL, err)
		}
		return u, u.Hostname(), nil
	case cc.Service != nil:
		s := cc.Service
		host := s.Name + "." + s.Namespace + ".svc"
		port := int32(443)
		if s.Port != nil {
			port = *s.Port
		}
		u := &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(int(port)))}
		if s.Path != nil {
			u.Path = *s.Path
		}
		return u, host, nil
	}
	return nil, "", errors.New("its clientConfig names neither a service nor a url")
}

// newReview is a CREATE review of the kind the webhook's first rule names,
// of an object in namespace, which graceguard never treats.
func newReview(rules []admissionregistrationv1.RuleWithOperations, namespace string) (*admissionv1.AdmissionReview, error) {
	if len(rules) == 0 || len(rules[0].APIGroups) == 0 || len(rules[0].APIVersions) == 0 || len(rules[0].Resources) == 0 {
		return nil, errors.New("it has no rule naming a group, version and resource")
	}
	r := rules[0]
	group, version, resource := r.APIGroups[0], r.APIVersions[0], r.Resources[0]
	const name = "graceguard-selftest"
	pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "graceguard-selftest.invalid/app"}}}
	var obj runtime.Object
	var kind string
	if group == "" && resource == "pods" {
		kind = "Pod"
		obj = &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: pod}
	} else {
		w, ok := workloadOf(group, resource)
		if !ok {
			return nil, fmt.Errorf("it reviews %s/%s %s, of which the service check builds no object", group, version, resource)
		}
		kind = w.Kind
		tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodTemplateSpec{Spec: pod})
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(w.GroupVersion())
		u.SetKind(kind)
		u.SetName(name)
		u.SetNamespace(namespace)
		if err := unstructured.SetNestedField(u.Object, tmpl, w.TemplatePath...); err != nil {
			return nil, err
		}
		obj = u
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	gvk := metav1.GroupVersionKind{Group: group, Version: version, Kind: kind}
	gvr := metav1.GroupVersionResource{Group: group, Version: version, Resource: resource}
	dryRun := true
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID(uuid.NewUUID()), Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
			Name: name, Namespace: namespace, Operation: admissionv1.Create, DryRun: &dryRun,
			UserInfo: authenticationv1.UserInfo{Username: "graceguard-selftest"},
			Object:   runtime.RawExtension{Raw: raw},
		},
	}, nil
}

func workloadOf(group, resource string) (mutate.WorkloadKind, bool) {
	for _, w := range mutate.Workloads {
		if w.Group == group && w.Resource == resource {
			return w, true
		}
	}
	return mutate.WorkloadKind{}, false
}

// clip is the start of an answer, for an error.
func clip(b []byte) string {
	const most = 300
	if len(b) > most {
		return string(b[:most]) + "..."
	}
	return string(b)
}
