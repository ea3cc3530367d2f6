package cli

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/graceguard/graceguard/pkg/routingprobe"
	"github.com/graceguard/graceguard/pkg/routingprobe/kubeprobe"
)

func TestMeasureRoutingFlagErrorsNameTheFlagTheValueAndWhatIsAccepted(t *testing.T) {
	base := []string{"measure-routing", "--image=registry.example/graceguard:v1", "--url=http://probe.example/"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"neither --url nor --in-cluster outside --dry-run", []string{"measure-routing", "--image=x"},
			"--url: required: the http(s) URL of your Ingress, HTTPRoute or load balancer routed to the probe's Service (--dry-run prints what to create), or --in-cluster"},
		{"both --url and --in-cluster", append(base, "--in-cluster"), "--url=http://probe.example/: --in-cluster sends the load to the probe's Service itself: give one of --url and --in-cluster"},
		{"no --image", []string{"measure-routing", "--url=http://x/"}, "--image: required: graceguard's image"},
		{"a URL without a scheme", append(base, "--url=probe.example"), "--url=probe.example: want an http:// or https:// URL with a host"},
		{"a URL that does not parse", append(base, "--url=http://[::1"), `--url=http://[::1: not a URL: missing ']' in host`},
		{"one replica leaves nothing to route to", append(base, "--replicas=1"), "--replicas=1: want 2 to 10 (one is deleted at a time; the others keep the path up)"},
		{"too many deletions", append(base, "--deletions=101"), "--deletions=101: want 1 to 100"},
		{"a rate of zero", append(base, "--rate=0"), "--rate=0: want 1 to 1000 requests per second"},
		{"too few requests", append(base, "--max-requests=5"), "--max-requests=5: want 10 to 10000000"},
		{"a hold longer than 10m", append(base, "--hold=11m"), "--hold=11m0s: want 5s to 10m"},
		{"a hold in part seconds", append(base, "--hold=7500ms"), "--hold=7.5s: want whole seconds (a preStop sleep's unit)"},
		{"a quiet period over half the hold", append(base, "--hold=10s", "--quiet=6s"), "--quiet=6s: want at most half of --hold=10s"},
		{"a quiet period too short for the rate", append(base, "--rate=2", "--replicas=3"), "--quiet=3s: want at least 10s at --rate=2 over 4 Pods (five times the gap between two requests to one Pod): raise --quiet or --rate"},
		{"a negative margin", append(base, "--margin=-1s"), "--margin=-1s: want 0s to 5m"},
		{"a timeout too short to do anything", append(base, "--timeout=1s"), "--timeout=1s: want 5s to 6h"},
		{"a profile name that is not a DNS label", append(base, "--profile-name=Corp_LB"), "--profile-name=Corp_LB: a lowercase RFC 1123 label"},
		{"a host that is no DNS name", append(base, "--host=probe shop"), "--host=probe shop: want a DNS name, the host your path routes by (e.g. probe.shop.example)"},
		{"--host with --in-cluster", []string{"measure-routing", "--image=x", "--in-cluster", "--host=probe.shop.example"}, "--host=probe.shop.example: --in-cluster calls the probe's Service by its own name: --host goes with --url"},
		{"--ingress-class with --in-cluster", []string{"measure-routing", "--image=x", "--in-cluster", "--ingress-class=nginx"}, "--ingress-class=nginx: --in-cluster needs no Ingress: --ingress-class goes with --url"},
		{"an IngressClass name that cannot be one", append(base, "--ingress-class=Nginx_Public"), "--ingress-class=Nginx_Public: not an IngressClass name: a lowercase RFC 1123 subdomain"},
		{"-n is not taken: the namespace is generated", append(base, "-n", "shop"), "unknown shorthand flag: 'n' in -n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tt.args...)
			if code != ExitUsage || stdout != "" {
				t.Errorf("exit %d with stdout %q, want %d and nothing", code, stdout, ExitUsage)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr)
			}
		})
	}
}

func TestMeasureReport(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	rounds := []routingprobe.Round{
		{Pod: "probe-5c9-a", Delay: ms(989), Served: 30},
		{Pod: "probe-5c9-b", Delay: ms(2077), Served: 61},
		{Pod: "probe-5c9-c", Delay: ms(1891), Served: 55},
		{Pod: "probe-5c9-d", Delay: 0, Served: 0},
	}
	samples := make([]routingprobe.Sample, 1000)
	for i := range samples {
		samples[i].Pod = "probe-5c9-a"
	}
	samples[7] = routingprobe.Sample{Err: "HTTP 502"}
	res := routingprobe.ResultOf(rounds, samples, 3)
	var b strings.Builder
	err := writeMeasureReport(&b, measureReport{Path: "http://probe.shop.example/", Cluster: "kind-shop", Date: time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC),
		Replicas: 3, Rate: 50, Result: res, Margin: time.Second, Profile: "shop-traefik"})
	if err != nil {
		t.Fatal(err)
	}
	want := `Routing withdrawal through http://probe.shop.example/ (cluster kind-shop, 2026-12-07)
4 deletions of 3 probe Pods at 50 requests/s: 1000 requests sent, 1 failed

withdrawal (delete call to the last request the Pod answered): min 0.000s, median 0.989s, p90 2.077s, max 2.077s

                 0s                                      4s
  1 probe-5c9-a  ##########                              | 0.989s
  2 probe-5c9-b  #####################                   | 2.077s
  3 probe-5c9-c  ###################                     | 1.891s
  4 probe-5c9-d                                          | 0.000s

probe-5c9-d got no request after its delete call: the path withdrew it before then, or sent it too few requests to tell (raise --rate).

3 requests not sent: too many were waiting for an answer (the path is slow; lower --rate).

1 request failed: no probe Pod answered (an error status, a refused or cut connection, a timeout).

Routing profile shop-traefik: 4s, the slowest withdrawal 2.077s + margin 1s, rounded up to whole seconds.
Add it to graceguard's chart values (or run the webhook and the plugin with --routing-profile=shop-traefik=4s):

  config:
    routingProfiles:
      # basis measurement: kubectl graceguard measure-routing, cluster kind-shop, 2026-12-07, path http://probe.shop.example/, 4 deletions, 1000 requests
      shop-traefik: {routingDelay: 4s}

and name it on the Pods, or the namespaces, behind this path:

  metadata:
    annotations:
      graceguard.io/routing-profile: shop-traefik
`
	if got := b.String(); got != want {
		t.Errorf("report differs:\n%s", diff(want, got))
	}

	// The profile it prints is one graceguard takes: explain, with the
	// printed flag and the annotation, gives the Pod that routing delay.
	flag := regexp.MustCompile(`--routing-profile=\S+=\d+s`).FindString(b.String())
	pod := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(pod, []byte(`apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {graceguard.io/routing-profile: shop-traefik}
spec:
  containers: [{name: app, image: registry.example/web:1.0}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "", "explain", "-f", pod, flag)
	if code != ExitOK || !regexp.MustCompile(`routing\s+4s.*shop-traefik`).MatchString(stdout) {
		t.Errorf("explain with %s: exit %d\n%s%s", flag, code, stdout, stderr)
	}
}

// The Job's Pod ended without a result: the error names the Pod, how it
// ended and the last line of its log (the fake clientset's log is "fake
// logs").
func TestWaitClientSaysWhyTheJobGaveNoResult(t *testing.T) {
	ctx := t.Context()
	kube := fake.NewClientset()
	labels := kubeprobe.Labels()
	labels[kubeprobe.LabelName] = kubeprobe.ClientAppName
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe-client-x7", Namespace: "gm", Labels: labels},
		Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	if _, err := kube.CoreV1().Pods("gm").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := &measurement{flags: defaultMeasureFlags(), kube: kube, errOut: io.Discard, namespace: "gm"}
	_, err := m.waitClient(ctx)
	want := "the client Pod probe-client-x7 ended Failed: the client printed no result; its last line: fake logs"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
