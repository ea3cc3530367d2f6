package chart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graceguard/graceguard/test/harness/apiserver"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// These tests need kube-apiserver and etcd: $KUBEBUILDER_ASSETS, or what
// `make envtest-assets` left in bin/k8s/<version>/. Without them they fail
// (`make test` provides them): a skipped install test proves nothing.

type cluster struct {
	cfg        *rest.Config
	c          client.Client
	kubeconfig string
	api        *apiserver.APIServer
	// net routes Services to processes, for the API server and for the
	// processes the hook runner starts.
	net *apiserver.ServiceNetwork
}

func TestAgainstAnAPIServer(t *testing.T) {
	network, err := apiserver.NewServiceNetwork()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = network.Close() })
	api, err := apiserver.StartAPIServer(context.Background(), apiserver.APIServerOptions{Alone: true, APIServerFlags: network.APIServerFlags()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	c, err := client.New(api.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path, err := api.Kubeconfig("helm")
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{cfg: api.Config, c: c, kubeconfig: path, api: api, net: network}

	t.Run("every certificate mode is accepted by the API server", cl.testServerSideValidation)
	t.Run("webhooks are called only for opted-in Pods and template changes", cl.testWebhookScope)
	t.Run("upgrade keeps runtime certificates (server-side apply)", func(t *testing.T) { cl.testUpgradeKeepsCertificates(t, true) })
	t.Run("upgrade keeps runtime certificates (client-side apply)", func(t *testing.T) { cl.testUpgradeKeepsCertificates(t, false) })
	t.Run("helm upgrade from the previous chart updates the CRD and keeps the reports", cl.testCRDUpgrade)
	t.Run("helm test passes against graceguard and fails without it; helm uninstall unregisters the webhooks first", cl.testHelmTestAndUninstall)
}

func (cl *cluster) namespace(t *testing.T, name string, lbls map[string]string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	if err := cl.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// No controller-manager: make the ServiceAccount Pods default to.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}}
	if err := cl.c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// testServerSideValidation creates every rendered object with dryRun=All:
// the API server's own validation (webhook CEL compiled, Pod spec rules
// such as preStop sleep <= grace, RBAC, PDB) for each certificate mode.
// cert-manager objects are skipped: envtest has no cert-manager CRDs.
func (cl *cluster) testServerSideValidation(t *testing.T) {
	cl.namespace(t, namespace, nil)
	for name, y := range modes {
		t.Run(name, func(t *testing.T) {
			rel, err := renderChart(values(t, y), renderOpts{})
			if err != nil {
				t.Fatal(err)
			}
			created := 0
			for _, doc := range docSep.Split(rel.Manifest, -1) {
				if strings.TrimSpace(stripComments(doc)) == "" {
					continue
				}
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
					t.Fatal(err)
				}
				if len(u.Object) == 0 || u.GroupVersionKind().Group == "cert-manager.io" {
					continue
				}
				if err := cl.c.Create(context.Background(), u, client.DryRunAll); err != nil {
					t.Errorf("the API server refuses %s %s: %v", u.GetKind(), u.GetName(), err)
				}
				created++
			}
			if created < 8 {
				t.Errorf("only %d objects checked", created)
			}
		})
	}
}

// review is what the fake webhook server was asked.
type review struct{ path, kind, op, ns, name string }

type recorder struct {
	mu      sync.Mutex
	reviews []review
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var ar admissionv1.AdmissionReview
	body, _ := io.ReadAll(req.Body)
	if err := json.Unmarshal(body, &ar); err != nil || ar.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.reviews = append(r.reviews, review{req.URL.Path, ar.Request.Kind.Kind, string(ar.Request.Operation), ar.Request.Namespace, ar.Request.Name})
	r.mu.Unlock()
	ar.Response = &admissionv1.AdmissionResponse{UID: ar.Request.UID, Allowed: true}
	ar.Request = nil
	_ = json.NewEncoder(w).Encode(&ar)
}

func (r *recorder) take() []review {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reviews
	r.reviews = nil
	return out
}

// testWebhookScope installs the rendered webhook configurations, pointed at
// a recording server instead of the Service, and checks which requests the
// API server sends: the namespace and object selectors and the CEL
// matchConditions, evaluated by the real thing.
func (cl *cluster) testWebhookScope(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	srv := httptest.NewTLSServer(rec)
	defer srv.Close()
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	r := render(t, "")
	point := func(cc *admissionregv1.WebhookClientConfig) {
		url := srv.URL + *cc.Service.Path
		cc.URL, cc.Service, cc.CABundle = &url, nil, caBundle
	}
	m := r.mutating(t).DeepCopy()
	m.ObjectMeta = metav1.ObjectMeta{Name: "scope-test"}
	for i := range m.Webhooks {
		point(&m.Webhooks[i].ClientConfig)
	}
	v := r.validating(t).DeepCopy()
	v.ObjectMeta = metav1.ObjectMeta{Name: "scope-test"}
	for i := range v.Webhooks {
		point(&v.Webhooks[i].ClientConfig)
	}
	for _, o := range []client.Object{m, v} {
		if err := cl.c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
		t.Cleanup(func() { _ = cl.c.Delete(ctx, o) })
	}

	cl.namespace(t, "shop", map[string]string{"graceguard.io/inject": "enabled"})
	cl.namespace(t, "bystander", nil)
	cl.namespace(t, "almost", map[string]string{"graceguard.io/inject": "true"})
	cl.namespace(t, namespace, map[string]string{"graceguard.io/inject": "enabled"})
	cl.namespace(t, "kube-system", nil)
	ks := &corev1.Namespace{}
	if err := cl.c.Get(ctx, client.ObjectKey{Name: "kube-system"}, ks); err != nil {
		t.Fatal(err)
	}
	ks.Labels["graceguard.io/inject"] = "enabled"
	if err := cl.c.Update(ctx, ks); err != nil {
		t.Fatal(err)
	}

	pod := func(ns, name string, lbls, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, Annotations: ann},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
	}
	// The API server picks up new webhook configurations asynchronously.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if err := cl.c.Create(ctx, pod("shop", fmt.Sprintf("probe-%d", i), nil, nil), client.DryRunAll); err != nil {
			t.Fatalf("probe Pod: %v", err)
		}
		if len(rec.take()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server never called the webhooks")
		}
		time.Sleep(200 * time.Millisecond)
	}
	rec.take()

	expect := func(what string, do func() error, want ...review) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := rec.take()
		if !slices.Equal(got, want) {
			t.Errorf("%s: webhook calls %+v, want %+v", what, got, want)
		}
	}
	create := func(o client.Object) func() error { return func() error { return cl.c.Create(ctx, o) } }

	expect("a Pod in an opted-in namespace", create(pod("shop", "web", map[string]string{"app.kubernetes.io/name": "graceguard"}, nil)),
		review{"/mutate-v1-pod", "Pod", "CREATE", "shop", "web"}, review{"/validate-v1-pod", "Pod", "CREATE", "shop", "web"})
	mirror := pod("shop", "static-web-node1", nil, map[string]string{"kubernetes.io/config.mirror": "abc"})
	mirror.Spec.NodeName = "node1" // the API requires it of mirror Pods
	expect("a mirror Pod", create(mirror))
	// Labels are no way out: a Pod labelled like graceguard's own, in an
	// opted-in namespace, is reviewed like any other.
	expect("a Pod labelled like graceguard's own", create(pod("shop", "graceguard-x", r.deployment(t).Spec.Template.Labels, nil)),
		review{"/mutate-v1-pod", "Pod", "CREATE", "shop", "graceguard-x"}, review{"/validate-v1-pod", "Pod", "CREATE", "shop", "graceguard-x"})
	expect("a Pod in a namespace that did not opt in", create(pod("bystander", "web", nil, nil)))
	expect(`a Pod in a namespace labelled inject=true, not "enabled"`, create(pod("almost", "web", nil, nil)))
	expect("a Pod in graceguard's namespace", create(pod(namespace, "web", nil, nil)))
	expect("a Pod in kube-system", create(pod("kube-system", "web", nil, nil)))

	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}},
				Spec:       pod("", "", nil, nil).Spec,
			},
		},
	}
	expect("a Deployment created", create(dep), review{"/validate-workloads", "Deployment", "CREATE", "shop", "api"})
	update := func(o client.Object, change func()) func() error {
		return func() error {
			if err := cl.c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
			change()
			return cl.c.Update(ctx, o)
		}
	}
	expect("a Deployment scaled", update(dep, func() { two := int32(2); dep.Spec.Replicas = &two }))
	expect("a Deployment relabelled", update(dep, func() { dep.Labels = map[string]string{"team": "a"} }))
	expect("a Deployment's Pod template changed", update(dep, func() {
		dep.Spec.Template.Annotations = map[string]string{"graceguard.io/max-work": "30s"}
	}), review{"/validate-workloads", "Deployment", "UPDATE", "shop", "api"})

	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "report"},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: func() corev1.PodSpec {
					s := pod("", "", nil, nil).Spec
					s.RestartPolicy = corev1.RestartPolicyNever
					return s
				}(),
			}}},
		},
	}
	expect("a CronJob created", create(cj), review{"/validate-workloads", "CronJob", "CREATE", "shop", "report"})
	expect("a CronJob rescheduled", update(cj, func() { cj.Spec.Schedule = "30 * * * *" }))
	expect("a CronJob's Pod template changed", update(cj, func() {
		cj.Spec.JobTemplate.Spec.Template.Annotations = map[string]string{"graceguard.io/cleanup": "5s"}
	}), review{"/validate-workloads", "CronJob", "UPDATE", "shop", "report"})
}

// testUpgradeKeepsCertificates installs the chart with Helm, writes a CA and
// caBundle the way the rotator does (Update, its own field manager), then
// upgrades with changed webhook values and rolls back: the certificates
// must survive both, and the changed values must land.
func (cl *cluster) testUpgradeKeepsCertificates(t *testing.T, serverSide bool) {
	ctx := context.Background()
	ns, rel := "gg-csa", "csa"
	if serverSide {
		ns, rel = "gg-ssa", "ssa"
	}
	name := rel + "-graceguard"
	cl.namespace(t, ns, nil)

	cfg := action.NewConfiguration()
	flags := genericclioptions.NewConfigFlags(false)
	cache := t.TempDir()
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &cl.kubeconfig, &ns, &cache
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}

	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace = rel, ns
	inst.ServerSideApply = serverSide
	inst.WaitStrategy = kube.HookOnlyStrategy
	inst.Timeout = time.Minute
	// Two releases in turn: the CRD, which outlives a release, is left to
	// testCRDUpgrade's.
	if _, err := inst.RunWithContext(ctx, ch, values(t, "crds: {install: false}")); err != nil {
		t.Fatalf("helm install: %v", err)
	}

	// What the rotator does on its first start.
	certs := map[string][]byte{"ca.crt": []byte(caPEM), "ca.key": []byte("k"), "tls.crt": []byte("c"), "tls.key": []byte("k")}
	secret := &corev1.Secret{}
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-cert"}, secret); err != nil {
		t.Fatalf("the chart's Secret: %v", err)
	}
	secret.Data = certs
	if err := cl.c.Update(ctx, secret, client.FieldOwner("graceguard-cert-rotator")); err != nil {
		t.Fatal(err)
	}
	inject := func() {
		m := &admissionregv1.MutatingWebhookConfiguration{}
		if err := cl.c.Get(ctx, client.ObjectKey{Name: name}, m); err != nil {
			t.Fatal(err)
		}
		for i := range m.Webhooks {
			m.Webhooks[i].ClientConfig.CABundle = []byte(caPEM)
		}
		if err := cl.c.Update(ctx, m, client.FieldOwner("graceguard-cert-rotator")); err != nil {
			t.Fatal(err)
		}
		v := &admissionregv1.ValidatingWebhookConfiguration{}
		if err := cl.c.Get(ctx, client.ObjectKey{Name: name}, v); err != nil {
			t.Fatal(err)
		}
		for i := range v.Webhooks {
			v.Webhooks[i].ClientConfig.CABundle = []byte(caPEM)
		}
		if err := cl.c.Update(ctx, v, client.FieldOwner("graceguard-cert-rotator")); err != nil {
			t.Fatal(err)
		}
	}
	inject()

	check := func(when string, timeout int32) {
		t.Helper()
		s := &corev1.Secret{}
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(secret), s); err != nil {
			t.Fatal(err)
		}
		if len(s.Data) != len(certs) || !bytes.Equal(s.Data["ca.crt"], []byte(caPEM)) {
			t.Errorf("%s: the Secret's certificates are gone: %v", when, s.Data)
		}
		m := &admissionregv1.MutatingWebhookConfiguration{}
		v := &admissionregv1.ValidatingWebhookConfiguration{}
		if err := cl.c.Get(ctx, client.ObjectKey{Name: name}, m); err != nil {
			t.Fatal(err)
		}
		if err := cl.c.Get(ctx, client.ObjectKey{Name: name}, v); err != nil {
			t.Fatal(err)
		}
		hooks := []struct {
			name    string
			ca      []byte
			timeout *int32
		}{{m.Webhooks[0].Name, m.Webhooks[0].ClientConfig.CABundle, m.Webhooks[0].TimeoutSeconds}}
		for _, h := range v.Webhooks {
			hooks = append(hooks, struct {
				name    string
				ca      []byte
				timeout *int32
			}{h.Name, h.ClientConfig.CABundle, h.TimeoutSeconds})
		}
		for _, h := range hooks {
			if !bytes.Equal(h.ca, []byte(caPEM)) {
				t.Errorf("%s: %s lost its caBundle (%q)", when, h.name, h.ca)
			}
			if h.timeout == nil || *h.timeout != timeout {
				t.Errorf("%s: %s timeoutSeconds = %v, want %d: the chart's change did not land", when, h.name, h.timeout, timeout)
			}
		}
	}
	check("after install", 5)

	up := action.NewUpgrade(cfg)
	up.Namespace = ns
	up.WaitStrategy = kube.HookOnlyStrategy
	up.Timeout = time.Minute
	changed := `
webhooks:
  mutatePods: {timeoutSeconds: 7}
  validatePods: {timeoutSeconds: 7}
  validateWorkloads: {timeoutSeconds: 7}
podAnnotations: {rollout: "2"}
crds: {install: false}
`
	if _, err := up.RunWithContext(ctx, rel, ch, values(t, changed)); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	check("after helm upgrade", 7)

	rb := action.NewRollback(cfg)
	rb.Version = 1
	rb.WaitStrategy = kube.HookOnlyStrategy
	rb.Timeout = time.Minute
	if err := rb.Run(rel); err != nil {
		t.Fatalf("helm rollback: %v", err)
	}
	check("after helm rollback", 5)

	un := action.NewUninstall(cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	un.Timeout = time.Minute
	// Without the pre-delete Job (`helm uninstall --no-hooks`): Helm
	// deletes the webhook configurations itself.
	// testUninstallRunsThePreDeleteHook runs it.
	un.DisableHooks = true
	if _, err := un.Run(rel); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-cert"}},
		&admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}},
	} {
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("after uninstall, %T %s: %v (want it gone with the release)", o, o.GetName(), err)
		}
	}
}
