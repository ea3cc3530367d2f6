package chart_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/test/harness/apiserver"
)

// previousChartCommit is the chart of graceguard 0.1.0 as it was before
// the ShutdownReport CRD became a template: the last commit with it in
// crds/, which Helm installs once and never upgrades.
const previousChartCommit = "b12c39954c786f53f73280cb97cd54abe77b1ae1"

const crdName = "shutdownreports.graceguard.io"

var reportGVR = schema.GroupVersionResource{Group: "graceguard.io", Version: "v1alpha1", Resource: "shutdownreports"}

// previousChart loads the chart at previousChartCommit, archived as Helm
// packages a chart into testdata (so a shallow clone tests it too):
//
//	git archive --format=tar.gz --prefix=graceguard/ <previousChartCommit>:charts/graceguard > test/chart/testdata/graceguard-0.1.0.tgz
func previousChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load(filepath.Join("testdata", "graceguard-0.1.0.tgz"))
	if err != nil {
		t.Fatalf("the chart of graceguard 0.1.0 (commit %s): %v", previousChartCommit, err)
	}
	return ch
}

// helm is a Helm SDK configuration acting in ns with the admin's
// kubeconfig.
func (cl *cluster) helm(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	cfg := action.NewConfiguration()
	flags := genericclioptions.NewConfigFlags(false)
	cache := t.TempDir()
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &cl.kubeconfig, &ns, &cache
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func install(t *testing.T, cfg *action.Configuration, ch *chartv2.Chart, rel, ns, vals string) error {
	t.Helper()
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace = rel, ns
	// No kubelet: Helm must not wait for the Deployments.
	inst.WaitStrategy = kube.HookOnlyStrategy
	inst.Timeout = time.Minute
	_, err := inst.RunWithContext(context.Background(), ch, values(t, vals))
	return err
}

func upgrade(t *testing.T, cfg *action.Configuration, ch *chartv2.Chart, rel, ns, vals string) error {
	t.Helper()
	up := action.NewUpgrade(cfg)
	up.Namespace = ns
	up.WaitStrategy = kube.HookOnlyStrategy
	up.Timeout = time.Minute
	_, err := up.RunWithContext(context.Background(), rel, ch, values(t, vals))
	return err
}

// uninstallWithoutHooks is `helm uninstall --no-hooks`: no kubelet would
// run the pre-delete Job (testHelmTestAndUninstall runs it).
func uninstallWithoutHooks(t *testing.T, cfg *action.Configuration, rel string) {
	t.Helper()
	un := action.NewUninstall(cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	un.DisableHooks = true
	if _, err := un.Run(rel); err != nil {
		t.Fatalf("helm uninstall %s: %v", rel, err)
	}
}

// testCRDUpgrade upgrades a release of the previous chart, whose CRD Helm
// installed from crds/ and owns no more than any other, to this one: the
// CRD comes under the release once adopted (the chart README's step), and
// from then on every upgrade updates it, while neither the upgrade, a
// rollback, an uninstall nor a reinstall touches the ShutdownReports.
func (cl *cluster) testCRDUpgrade(t *testing.T) {
	ctx := context.Background()
	const ns, rel, apps = "gg-upgrade", "up", "gg-upgrade-apps"
	cl.namespace(t, ns, nil)
	cl.namespace(t, apps, nil)
	cfg := cl.helm(t, ns)
	old := previousChart(t)
	if len(old.CRDObjects()) != 1 {
		t.Fatalf("the previous chart has %d CRDs in crds/, want its one: is %s the commit before the CRD moved?", len(old.CRDObjects()), previousChartCommit)
	}
	current, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}

	if err := install(t, cfg, old, rel, ns, ""); err != nil {
		t.Fatalf("helm install of the previous chart: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := cl.c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatalf("the previous chart installed no CRD: %v", err)
	}
	// What the observer wrote, which every step below must keep.
	dyn, err := dynamic.NewForConfig(cl.cfg)
	if err != nil {
		t.Fatal(err)
	}
	report := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "graceguard.io/v1alpha1", "kind": "ShutdownReport",
		"metadata": map[string]any{"name": "deployment-api", "namespace": apps},
		"spec":     map[string]any{"workload": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}},
	}}
	report, err = dyn.Resource(reportGVR).Namespace(apps).Create(ctx, report, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	report.Object["status"] = map[string]any{"observed": int64(7), "summary": map[string]any{"samples": int64(7), "kills": int64(1), "hookFailures": int64(0)}}
	if _, err := dyn.Resource(reportGVR).Namespace(apps).UpdateStatus(ctx, report, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kept := func(when string) {
		t.Helper()
		got, err := dyn.Resource(reportGVR).Namespace(apps).Get(ctx, "deployment-api", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the ShutdownReport is gone: %v", when, err)
		}
		if n, _, _ := unstructured.NestedInt64(got.Object, "status", "observed"); got.GetUID() != report.GetUID() || n != 7 {
			t.Errorf("%s: the ShutdownReport was replaced or lost its status (uid %s, observed %d)", when, got.GetUID(), n)
		}
	}
	getCRD := func(when string) *apiextensionsv1.CustomResourceDefinition {
		t.Helper()
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := cl.c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
			t.Fatalf("%s: the CRD is gone: %v", when, err)
		}
		return crd
	}

	// Helm refuses to take over what it did not create, naming it: the
	// error the chart README tells users to expect.
	err = upgrade(t, cfg, current, rel, ns, "")
	if err == nil || !strings.Contains(err.Error(), `CustomResourceDefinition "shutdownreports.graceguard.io"`) || !strings.Contains(err.Error(), "meta.helm.sh/release-name") {
		t.Fatalf("helm upgrade without adopting the CRD: %v, want Helm's ownership error naming it", err)
	}
	// The README's adoption, as kubectl label and annotate do it.
	crd = getCRD("adopting")
	crd.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
	crd.Annotations["meta.helm.sh/release-name"], crd.Annotations["meta.helm.sh/release-namespace"] = rel, ns
	if err := cl.c.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	if err := upgrade(t, cfg, current, rel, ns, ""); err != nil {
		t.Fatalf("helm upgrade once the CRD is adopted: %v", err)
	}
	crd = getCRD("after the upgrade")
	if crd.Annotations["helm.sh/resource-policy"] != "keep" || crd.Labels["helm.sh/chart"] != "graceguard-"+current.Metadata.Version {
		t.Errorf("after the upgrade the CRD's metadata is %v %v: the upgrade did not apply the chart's", crd.Labels, crd.Annotations)
	}
	kept("after the upgrade")

	// A later chart that changes the CRD: the upgrade applies the change.
	later := chartWithColumn(t, "Observed", ".status.observed")
	if err := upgrade(t, cfg, later, rel, ns, ""); err != nil {
		t.Fatalf("helm upgrade to a chart with a new printer column: %v", err)
	}
	if cols := printerColumns(getCRD("after the next upgrade")); !strings.Contains(cols, "Observed=.status.observed") {
		t.Errorf("after the next upgrade the CRD's printer columns are %s: helm upgrade did not update it", cols)
	}
	kept("after the next upgrade")

	// Back to the previous chart, whose release has no CRD: kept.
	rb := action.NewRollback(cfg)
	rb.Version, rb.WaitStrategy, rb.Timeout = 1, kube.HookOnlyStrategy, time.Minute
	if err := rb.Run(rel); err != nil {
		t.Fatalf("helm rollback to the previous chart: %v", err)
	}
	getCRD("after the rollback")
	kept("after the rollback")
	if err := upgrade(t, cfg, current, rel, ns, ""); err != nil {
		t.Fatalf("helm upgrade after the rollback: %v", err)
	}

	uninstallWithoutHooks(t, cfg, rel)
	if crd := getCRD("after helm uninstall"); crd.DeletionTimestamp != nil {
		t.Errorf("helm uninstall is deleting the CRD")
	}
	kept("after helm uninstall")

	// The kept CRD names the release that installed it: a release of
	// another name may not take it, and says so; without it, it installs.
	const otherNS, other = "gg-upgrade-other", "other"
	cl.namespace(t, otherNS, nil)
	otherCfg := cl.helm(t, otherNS)
	if err := install(t, otherCfg, current, other, otherNS, ""); err == nil || !strings.Contains(err.Error(), `CustomResourceDefinition "shutdownreports.graceguard.io"`) {
		t.Errorf("helm install of another release over the kept CRD: %v, want Helm's ownership error naming it", err)
	}
	if err := install(t, otherCfg, current, other, otherNS, "crds: {install: false}"); err != nil {
		t.Fatalf("helm install of another release with crds.install=false: %v", err)
	}
	uninstallWithoutHooks(t, otherCfg, other)
	// The same release again takes its CRD back.
	if err := install(t, cfg, current, rel, ns, ""); err != nil {
		t.Fatalf("helm install of the same release over its kept CRD: %v", err)
	}
	uninstallWithoutHooks(t, cfg, rel)
	kept("after a reinstall")
}

// chartWithColumn is this chart with one more printer column in its CRD:
// a later chart that changes it.
func chartWithColumn(t *testing.T, name, path string) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ch.Files {
		if f.Name == "files/crds/graceguard.io_shutdownreports.yaml" {
			const anchor = "  - additionalPrinterColumns:\n"
			if !bytes.Contains(f.Data, []byte(anchor)) {
				t.Fatalf("%s has no %q to add a column after", f.Name, anchor)
			}
			f.Data = bytes.Replace(f.Data, []byte(anchor), []byte(anchor+"    - jsonPath: "+path+"\n      name: "+name+"\n      type: integer\n"), 1)
			return ch
		}
	}
	t.Fatal("the chart has no files/crds/graceguard.io_shutdownreports.yaml")
	return nil
}

func printerColumns(crd *apiextensionsv1.CustomResourceDefinition) string {
	var cols []string
	for _, v := range crd.Spec.Versions {
		for _, c := range v.AdditionalPrinterColumns {
			cols = append(cols, c.Name+"="+c.JSONPath)
		}
	}
	return strings.Join(cols, ", ")
}

var webhookBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "gg-chart-webhook-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "webhook")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/graceguard/graceguard/cmd/webhook").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/webhook: %v\n%s", err, out)
	}
	return bin, nil
})

// testHelmTestAndUninstall installs the chart, runs graceguard as its
// Deployment would (its arguments, as its ServiceAccount, its
// self-managed certificates), behind its Service on the service network,
// then runs `helm test` and `helm uninstall` with the Helm SDK, the hooks'
// Pods and Job run by the hook runner: each container's arguments given
// to the webhook binary (the image's entrypoint), as its ServiceAccount.
func (cl *cluster) testHelmTestAndUninstall(t *testing.T) {
	ctx := context.Background()
	const ns, rel = "gg-hooks", "hooks"
	const name = rel + "-graceguard"
	cl.namespace(t, ns, nil)
	cfg := cl.helm(t, ns)
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := webhookBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The CRD is testCRDUpgrade's release's.
	if err := install(t, cfg, ch, rel, ns, "crds: {install: false}\ntests: {timeout: 10s}"); err != nil {
		t.Fatalf("helm install: %v", err)
	}

	d := &appsv1.Deployment{}
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		switch strings.SplitN(a, "=", 2)[0] {
		case "--port", "--health-probe-bind-address", "--metrics-bind-address", "--cert-dir", "--shutdown-delay":
		default:
			args = append(args, a)
		}
	}
	port, err := freeport.Get()
	if err != nil {
		t.Fatal(err)
	}
	health, err := freeport.Get()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := apiserver.WriteKubeconfig(kubeconfig, cl.cfg, "", "system:serviceaccount:"+ns+":"+d.Spec.Template.Spec.ServiceAccountName); err != nil {
		t.Fatal(err)
	}
	replica, err := cl.api.StartProcess("graceguard "+rel, bin, append(args, "--namespace="+ns, "--port="+strconv.Itoa(port),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(health), "--metrics-bind-address=0", "--cert-dir="+t.TempDir(),
		"--shutdown-delay=0s", "--kubeconfig="+kubeconfig)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Stop() })
	svc := &corev1.Service{}
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	svcPort := svc.Spec.Ports[0].Port
	cl.net.RouteService(svc, svcPort, "127.0.0.1:"+strconv.Itoa(port))
	for deadline := time.Now().Add(90 * time.Second); apiserver.Readyz(health) != http.StatusOK; time.Sleep(200 * time.Millisecond) {
		if err := replica.Exited(); err != nil || time.Now().After(deadline) {
			t.Fatalf("graceguard did not become ready: %v", err)
		}
	}

	var mu sync.Mutex
	var atJob []string // what exists when the pre-delete Job runs
	runner := cl.api.RunHooks(apiserver.HookOptions{Namespace: ns, Binary: bin,
		Env: []string{"HTTPS_PROXY=" + cl.net.ProxyURL()},
		Before: func(kind, hook string) {
			if kind != "Job" {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, o := range []client.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				&admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}} {
				if err := cl.c.Get(ctx, client.ObjectKeyFromObject(o), o); err == nil {
					atJob = append(atJob, fmt.Sprintf("%T", o))
				}
			}
			// Its RBAC is the two configurations, by name.
			asJob := rest.CopyConfig(cl.cfg)
			asJob.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name + "-pre-delete"}
			k := kubernetes.NewForConfigOrDie(asJob)
			if err := k.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "someone-elses", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
				atJob = append(atJob, fmt.Sprintf("deleting another configuration: %v", err))
			}
		}})
	t.Cleanup(func() {
		if err := runner.Stop(); err != nil {
			t.Errorf("the hook runner: %v", err)
		}
	})
	runs := func() string {
		var b strings.Builder
		for _, r := range runner.Runs() {
			b.WriteString(r.String() + "\n")
		}
		return b.String()
	}

	// helm test: both checks pass, and leave nothing behind.
	rt := action.NewReleaseTesting(cfg)
	rt.Namespace, rt.Timeout = ns, 2*time.Minute
	_, shutdown, err := rt.Run(rel)
	if err != nil {
		t.Fatalf("helm test: %v\n%s", err, runs())
	}
	if err := shutdown(); err != nil {
		t.Fatalf("helm test's deletion of its hooks: %v", err)
	}
	got := runner.Runs()
	if len(got) != 2 || got[0].Name != name+"-selftest-service" || got[1].Name != name+"-selftest-mutation" {
		t.Fatalf("helm test ran %d hooks, want the service check, then the mutation check:\n%s", len(got), runs())
	}
	host := name + "." + ns + ".svc:443"
	for _, want := range []string{
		"mutate-pods.graceguard.io: https://" + host + "/mutate-v1-pod answered a Pod review allowed",
		"validate-pods.graceguard.io: https://" + host + "/validate-v1-pod answered a Pod review allowed",
		"validate-pods-warn.graceguard.io: https://" + host + "/validate-v1-pod answered a Pod review allowed",
		"validate-workloads.graceguard.io: https://" + host + "/validate-workloads answered a Deployment review allowed",
	} {
		mustContain(t, "the service check's output", got[0].Output, want)
	}
	mustContain(t, "the mutation check's output", got[1].Output,
		`the dry-run Pod `+name+`-selftest/graceguard-selftest came back mutated: graceguard.io/budget="routing=5s work=20s cleanup=2s margin=3s grace=30s", terminationGracePeriodSeconds=30, preStop app: sleep 5s`)
	for _, r := range got {
		if r.User != "system:serviceaccount:"+ns+":"+name+"-selftest" {
			t.Errorf("%s ran as %s, want its own ServiceAccount", r.Name, r.User)
		}
	}
	if n := cl.net.Connections(host); n < 4 {
		t.Errorf("%d connections to %s: the service check did not go through the Service", n, host)
	}
	if n := cl.net.Connections(svc.Spec.ClusterIP + ":" + strconv.Itoa(int(svcPort))); n < 1 {
		t.Errorf("the API server never called graceguard through its Service for the dry-run Pod")
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name + "-selftest"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-selftest"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-selftest"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-selftest"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-selftest-service"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-selftest-mutation"}},
	} {
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("after a passing helm test, %T %s: %v (want it deleted)", o, o.GetName(), err)
		}
	}

	// helm test fails, saying why, when the Service has no replica behind it.
	cl.net.Unroute(svc, svcPort)
	_, shutdown, err = rt.Run(rel)
	if err == nil {
		t.Fatalf("helm test passed with nothing behind the Service:\n%s", runs())
	}
	_ = shutdown()
	got = runner.Runs()
	last := got[len(got)-1]
	if last.Name != name+"-selftest-service" || last.ExitCode == 0 {
		t.Fatalf("want the service check to fail first:\n%s", runs())
	}
	mustContain(t, "the failing service check's output", last.Output,
		"graceguard-webhook selftest failed: webhook mutate-pods.graceguard.io (MutatingWebhookConfiguration "+name+"): POST https://"+host+"/mutate-v1-pod",
		"(still failing after 10s)")
	cl.net.RouteService(svc, svcPort, "127.0.0.1:"+strconv.Itoa(port))

	// helm uninstall: the pre-delete Job unregisters the webhooks while
	// everything else still stands; then Helm deletes the rest.
	other := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}
	if err := cl.c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.c.Delete(ctx, other) })
	un := action.NewUninstall(cfg)
	un.WaitStrategy, un.Timeout = kube.HookOnlyStrategy, 2*time.Minute
	if _, err := un.Run(rel); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, runs())
	}
	got = runner.Runs()
	job := got[len(got)-1]
	if job.Kind != "Job" || job.Name != name+"-pre-delete" || job.ExitCode != 0 || job.User != "system:serviceaccount:"+ns+":"+name+"-pre-delete" {
		t.Fatalf("helm uninstall did not run the pre-delete Job as its ServiceAccount:\n%s", runs())
	}
	mustContain(t, "the pre-delete Job's output", job.Output,
		"MutatingWebhookConfiguration "+name+": deleted (release "+rel+" in "+ns+")",
		"ValidatingWebhookConfiguration "+name+": deleted (release "+rel+" in "+ns+")")
	mu.Lock()
	if want := "*v1.Deployment *v1.Service *v1.MutatingWebhookConfiguration"; strings.Join(atJob, " ") != want {
		t.Errorf("when the pre-delete Job ran: %v, want %s: the webhooks unregistered while the replicas still stand, and nothing else allowed", atJob, want)
	}
	mu.Unlock()
	for _, o := range []client.Object{
		&admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-pre-delete"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-pre-delete"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-pre-delete"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-pre-delete"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
	} {
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, %T %s: %v (want it gone)", o, o.GetName(), err)
		}
	}
	if err := cl.c.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
		t.Errorf("another MutatingWebhookConfiguration did not survive: %v", err)
	}
}
