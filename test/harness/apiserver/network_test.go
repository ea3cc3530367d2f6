package apiserver

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A client given the network as its proxy reaches a Service's backend by
// the Service's DNS name, TLS end to end; a Service without a backend
// fails as one without endpoints does; Close removes what it wrote.
func TestServiceNetworkRoutesAServiceByItsName(t *testing.T) {
	n, err := NewServiceNetwork()
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from "+r.Host)
	}))
	defer backend.Close()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "gg", Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10"}}
	n.RouteService(svc, 443, strings.TrimPrefix(backend.URL, "https://"))
	proxy, _ := url.Parse(n.ProxyURL())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test server's certificate names no Service
	get := func(u string) (string, error) {
		resp, err := c.Get(u)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("https://web.gg.svc/"); err != nil || body != "hello from web.gg.svc" {
		t.Errorf("through the Service's name: %q, %v", body, err)
	}
	if n.Connections("web.gg.svc:443") != 1 {
		t.Errorf("%d connections counted", n.Connections("web.gg.svc:443"))
	}
	if _, err := get("https://other.gg.svc/"); err == nil || !strings.Contains(err.Error(), "Bad Gateway") {
		t.Errorf("a Service with nothing routed: %v, want Bad Gateway", err)
	}
	n.Unroute(svc, 443)
	if _, err := get("https://web.gg.svc/"); err == nil {
		t.Error("an unrouted Service still answers")
	}
	if flags := n.APIServerFlags(); flags["egress-selector-config-file"] == "" {
		t.Errorf("API server flags %v", flags)
	}
	egress := n.APIServerFlags()["egress-selector-config-file"]
	if b, err := os.ReadFile(egress); err != nil || !strings.Contains(string(b), "proxyProtocol: HTTPConnect") {
		t.Errorf("egress configuration %q: %v", b, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(egress); !os.IsNotExist(err) {
		t.Errorf("%s left behind", egress)
	}
}
