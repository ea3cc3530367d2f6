// Command demo runs graceguard against a real kube-apiserver and etcd on this
// machine (no cluster, no Docker): it installs the webhook configurations
// the Helm chart ships, opts a namespace in, applies the workloads in
// examples/, and shows what graceguard injected, the deletion timeline, and
// the denials a user would see. It cleans up after itself, Ctrl-C included.
//
// Run it with `make demo`, which builds or reuses the control plane binaries.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/repo"
)

func main() {
	if err := repo.Chdir(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	examples := flag.String("examples", "examples", "directory of example workloads to apply")
	wait := flag.Bool("wait", false, "keep the control plane running after the demo (Ctrl-C to stop) and write a kubeconfig for kubectl")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *examples, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, examplesDir string, wait bool) (err error) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no examples in %q (want YAML files of Deployments or Pods)", examplesDir)
	}
	sort.Strings(files)

	fmt.Fprintln(out, "== graceguard demo: a real kube-apiserver and etcd on this machine, graceguard's webhooks from charts/graceguard")
	start := time.Now()
	cp, err := apiserver.StartAPIServer(ctx, apiserver.APIServerOptions{})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "\n== cleaning up: stopping graceguard, kube-apiserver and etcd")
		if serr := cp.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	version, _ := cp.Client.Discovery().ServerVersion()
	fmt.Fprintf(out, "kube-apiserver %s and graceguard up in %.1fs; graceguard is admitting Pods\n", version.GitVersion, time.Since(start).Seconds())

	warnings := &collector{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = warnings
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	const ns = "shop"
	fmt.Fprintf(out, "\n$ kubectl create namespace %s\n$ kubectl label namespace %s %s=%s\n", ns, ns, mutate.LabelInject, mutate.LabelInjectEnabled)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := apply(ctx, out, kube, warnings, ns, f); err != nil {
			return err
		}
	}

	if wait {
		return serve(ctx, out, cp)
	}
	return nil
}

// apply creates every object of one example file, as `kubectl apply` would,
// and shows what graceguard did.
func apply(ctx context.Context, out io.Writer, kube kubernetes.Interface, warnings *collector, ns, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	docs, err := manifest.Read(bytes.NewReader(data), file)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n------------------------------------------------------------------------------\n")
	fmt.Fprintf(out, "%s\n", comment(data))
	fmt.Fprintf(out, "$ kubectl apply -n %s -f %s\n", ns, file)
	for _, d := range docs {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(d.Raw, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", d.Source, err)
		}
		warnings.reset()
		switch o := obj.(type) {
		case *appsv1.Deployment:
			_, err = kube.AppsV1().Deployments(ns).Create(ctx, o, metav1.CreateOptions{})
			if report(out, "deployment.apps/"+o.Name, err, warnings) {
				fmt.Fprintln(out, "  (graceguard validates workloads and never changes them, so GitOps tools see no drift)")
				err = podFromTemplate(ctx, out, kube, warnings, ns, o)
			} else {
				err = nil
			}
		case *corev1.Pod:
			var got *corev1.Pod
			got, err = kube.CoreV1().Pods(ns).Create(ctx, o, metav1.CreateOptions{})
			if report(out, "pod/"+o.Name, err, warnings) {
				err = showPod(out, o, got)
			} else {
				err = nil
			}
		default:
			fmt.Fprintf(out, "(skipping %s: the demo applies Deployments and Pods)\n", d.Kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// podFromTemplate creates the Pod a Deployment's ReplicaSet would create
// (no controllers run here), so graceguard's mutation shows.
func podFromTemplate(ctx context.Context, out io.Writer, kube kubernetes.Interface, warnings *collector, ns string, d *appsv1.Deployment) error {
	t := d.Spec.Template
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: d.Name + "-7d9f8b-", Labels: t.Labels, Annotations: t.Annotations}, Spec: *t.Spec.DeepCopy()}
	warnings.reset()
	got, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	fmt.Fprintf(out, "\nThe ReplicaSet controller creates its Pods from the template; graceguard mutates each one:\n")
	if !report(out, "pod/"+d.Name+"-7d9f8b-…", err, warnings) {
		return nil
	}
	return showPod(out, p, got)
}

// report prints the outcome of a create as kubectl would and says whether
// it succeeded.
func report(out io.Writer, what string, err error, warnings *collector) bool {
	for _, w := range warnings.all() {
		fmt.Fprintf(out, "Warning: %s\n", w)
	}
	if err == nil {
		fmt.Fprintf(out, "%s created\n", what)
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		fmt.Fprintf(out, "Error from server (%s): %s\n", status.Status().Reason, err)
		return false
	}
	fmt.Fprintf(out, "error: %v\n", err)
	return false
}

// showPod prints what graceguard added to a Pod and its explain timeline.
func showPod(out io.Writer, before, after *corev1.Pod) error {
	if after.Annotations[mutate.AnnotationBudget] == "" {
		fmt.Fprintf(out, "pod/%s was admitted unchanged (%s: %q).\n", after.Name, mutate.AnnotationInject, after.Annotations[mutate.AnnotationInject])
		return nil
	}
	fmt.Fprintf(out, "\nWhat graceguard injected into pod/%s:\n", after.Name)
	fmt.Fprintf(out, "  metadata.annotations[%s]: %s\n", mutate.AnnotationBudget, after.Annotations[mutate.AnnotationBudget])
	fmt.Fprintf(out, "  spec.terminationGracePeriodSeconds: %s -> %d\n", graceOf(before), *after.Spec.TerminationGracePeriodSeconds)
	for i, c := range after.Spec.Containers {
		orig := before.Spec.Containers[i]
		if orig.Lifecycle == nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			fmt.Fprintf(out, "  spec.containers[%s].lifecycle.preStop: %s\n", c.Name, oneLine(c.Lifecycle.PreStop))
		}
		if orig.ReadinessProbe == nil && c.ReadinessProbe != nil {
			fmt.Fprintf(out, "  spec.containers[%s].readinessProbe: %s\n", c.Name, oneLine(c.ReadinessProbe))
		}
		if orig.LivenessProbe == nil && c.LivenessProbe != nil {
			fmt.Fprintf(out, "  spec.containers[%s].livenessProbe: %s\n", c.Name, oneLine(c.LivenessProbe))
		}
	}
	// The stored Pod, explained: the budget and the deletion timeline.
	stored := after.DeepCopy()
	stored.APIVersion, stored.Kind = "v1", "Pod"
	y, err := yaml.Marshal(stored)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n$ kubectl get pod %s -o yaml | kubectl graceguard explain -f -\n", after.Name)
	var errOut bytes.Buffer
	if code := cli.Execute([]string{"explain", "-f", "-"}, bytes.NewReader(y), out, &errOut); code != 0 {
		return fmt.Errorf("explain exited %d: %s", code, errOut.String())
	}
	return nil
}

func graceOf(p *corev1.Pod) string {
	if p.Spec.TerminationGracePeriodSeconds == nil {
		return "30 (default)"
	}
	return fmt.Sprint(*p.Spec.TerminationGracePeriodSeconds)
}

func oneLine(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// comment returns the leading comment of an example file.
func comment(data []byte) string {
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// serve keeps the control plane up with a kubeconfig for kubectl.
func serve(ctx context.Context, out io.Writer, cp *apiserver.APIServer) error {
	dir, err := os.MkdirTemp("", "graceguard-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["demo"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.Config.CAData}
	kc.AuthInfos["demo"] = &clientcmdapi.AuthInfo{ClientCertificateData: cp.Config.CertData, ClientKeyData: cp.Config.KeyData, Token: cp.Config.BearerToken}
	kc.Contexts["demo"] = &clientcmdapi.Context{Cluster: "demo", AuthInfo: "demo", Namespace: "shop"}
	kc.CurrentContext = "demo"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nThe control plane stays up until Ctrl-C. Try:\n  export KUBECONFIG=%s\n  bin/k8s/*/kubectl apply -f examples/1-web-api.yaml --dry-run=server -o yaml\n", path)
	<-ctx.Done()
	return nil
}

// collector records the warnings the API server returns.
type collector struct {
	mu sync.Mutex
	w  []string
}

func (c *collector) HandleWarningHeader(_ int, _ string, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w = append(c.w, text)
}

func (c *collector) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w = nil
}

func (c *collector) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.w...)
}
