package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// hookAnnotation marks the objects of Helm hooks.
const hookAnnotation = "helm.sh/hook"

// HookOptions configure RunHooks.
type HookOptions struct {
	// Namespace holds the hooks' Pods and Jobs (the release namespace).
	Namespace string
	// Binary is what the hooks' image runs: their containers' arguments
	// are given to it (the image's entrypoint, as the chart uses it).
	Binary string
	// Env is added to each process's environment (HTTPS_PROXY, to reach
	// Services through a ServiceNetwork).
	Env []string
	// Before, when set, is called before a hook's container runs, with
	// the hook's kind and name (what a test wants to see then).
	Before func(kind, name string)
}

// HookRun is one hook container run: what ran and what it printed.
type HookRun struct {
	Kind, Name string
	Args       []string
	// User is the identity it acted as: its ServiceAccount.
	User     string
	Output   string
	ExitCode int
}

// HookRunner stands in for the kubelet and kube-controller-manager for
// Helm hooks on an API server without them. A hook Pod's container, or a
// hook Job's Pod template's, runs as a process of Binary with its
// arguments and environment (values and the fieldRefs metadata.name and
// metadata.namespace), acting as the Pod's ServiceAccount (a kubeconfig
// impersonating it, so the chart's RBAC is all it gets), once; the Pod's
// phase (Succeeded, Failed) or the Job's conditions (Complete, Failed)
// are then written from its exit code, as the kubelet and the Job
// controller would. For a Namespace a hook creates it does what the
// namespace and service account controllers do: a default ServiceAccount
// once it exists, and once it is deleted, that ServiceAccount deleted and
// the namespace finalized.
type HookRunner struct {
	a      *APIServer
	o      HookOptions
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	runs []HookRun
	seen map[types.UID]bool
	errs []error
}

// RunHooks starts running hooks until Stop.
func (a *APIServer) RunHooks(o HookOptions) *HookRunner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &HookRunner{a: a, o: o, cancel: cancel, done: make(chan struct{}), seen: map[types.UID]bool{}}
	go func() {
		defer close(r.done)
		for {
			r.pass(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return r
}

// Runs are the hook containers run so far, in order.
func (r *HookRunner) Runs() []HookRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs)
}

// Stop stops running hooks; its error is what the stand-in itself could
// not do (write a status, finalize a namespace).
func (r *HookRunner) Stop() error {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

func (r *HookRunner) fail(err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
	}
}

// pass does once what is due: namespaces first (a hook Pod may need its
// namespace's default ServiceAccount), then Pods and Jobs.
func (r *HookRunner) pass(ctx context.Context) {
	kube := r.a.Client
	nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		r.fail(err)
		return
	}
	for _, ns := range nss.Items {
		if _, ok := ns.Annotations[hookAnnotation]; ok {
			r.fail(r.namespace(ctx, &ns))
		}
	}
	pods, err := kube.CoreV1().Pods(r.o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.fail(err)
		return
	}
	for _, p := range pods.Items {
		if _, ok := p.Annotations[hookAnnotation]; !ok || p.DeletionTimestamp != nil || (p.Status.Phase != "" && p.Status.Phase != corev1.PodPending) || r.done1(p.UID) {
			continue
		}
		r.fail(r.pod(ctx, &p))
	}
	jobs, err := kube.BatchV1().Jobs(r.o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.fail(err)
		return
	}
	for _, j := range jobs.Items {
		if _, ok := j.Annotations[hookAnnotation]; !ok || j.DeletionTimestamp != nil || len(j.Status.Conditions) > 0 || r.done1(j.UID) {
			continue
		}
		r.fail(r.job(ctx, &j))
	}
}

// done1 marks uid handled and says whether it was already.
func (r *HookRunner) done1(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.seen[uid]
	r.seen[uid] = true
	return was
}

func (r *HookRunner) namespace(ctx context.Context, ns *corev1.Namespace) error {
	sas := r.a.Client.CoreV1().ServiceAccounts(ns.Name)
	if ns.DeletionTimestamp == nil {
		_, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) { // Forbidden: terminating meanwhile
			return nil
		}
		return err
	}
	if err := sas.Delete(ctx, "default", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	ns = ns.DeepCopy()
	ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	_, err := r.a.Client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed: the next pass sees it again
	}
	return err
}

func (r *HookRunner) pod(ctx context.Context, p *corev1.Pod) error {
	code, err := r.run(ctx, "Pod", p.Name, &p.ObjectMeta, &p.Spec)
	if err != nil {
		return err
	}
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		p.Status.Phase = corev1.PodFailed
	}
	_, err = r.a.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

func (r *HookRunner) job(ctx context.Context, j *batchv1.Job) error {
	meta := j.Spec.Template.ObjectMeta
	meta.Name, meta.Namespace = j.Name+"-run", j.Namespace
	start := metav1.Now()
	code, err := r.run(ctx, "Job", j.Name, &meta, &j.Spec.Template.Spec)
	if err != nil {
		return err
	}
	j = j.DeepCopy()
	now := metav1.Now()
	j.Status.StartTime = &start
	cond := func(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, LastProbeTime: now, LastTransitionTime: now}
	}
	if code == 0 {
		j.Status.Succeeded, j.Status.CompletionTime = 1, &now
		j.Status.Conditions = append(j.Status.Conditions, cond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached), cond(batchv1.JobComplete, batchv1.JobReasonCompletionsReached))
	} else {
		j.Status.Failed = 1
		j.Status.Conditions = append(j.Status.Conditions, cond(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded), cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded))
	}
	_, err = r.a.Client.BatchV1().Jobs(j.Namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{})
	return err
}

// run runs spec's one container as a process, as the Pod's ServiceAccount,
// and returns its exit code.
func (r *HookRunner) run(ctx context.Context, kind, name string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) (int, error) {
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		return 0, fmt.Errorf("%s %s: the hook runner runs one container, not %d (and %d init containers)", kind, name, len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	if len(c.Command) != 0 {
		return 0, fmt.Errorf("%s %s: command %q replaces the image's entrypoint, which the hook runner is", kind, name, c.Command)
	}
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	user := "system:serviceaccount:" + meta.Namespace + ":" + sa
	kubeconfig := filepath.Join(r.a.o.Dir, "hook-"+name+".kubeconfig")
	if err := WriteKubeconfig(kubeconfig, r.a.Config, "", user); err != nil {
		return 0, err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "KUBECONFIG=" + kubeconfig}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+meta.Namespace)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+meta.Name)
		default:
			return 0, fmt.Errorf("%s %s: env %s comes from %+v, which the hook runner does not provide", kind, name, e.Name, e.ValueFrom)
		}
	}
	env = append(env, r.o.Env...)
	if r.o.Before != nil {
		r.o.Before(kind, name)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.o.Binary, c.Args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		return 0, fmt.Errorf("%s %s: running %s: %w", kind, name, r.o.Binary, err)
	}
	log := filepath.Join(r.a.o.Dir, "hook-"+name+".log")
	if err := os.WriteFile(log, out.Bytes(), 0o644); err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.runs = append(r.runs, HookRun{Kind: kind, Name: name, Args: c.Args, User: user, Output: out.String(), ExitCode: code})
	r.mu.Unlock()
	return code, nil
}

// String is a run as a log line: what ran, how it ended, what it printed.
func (h HookRun) String() string {
	return fmt.Sprintf("%s %s (%s, as %s) exited %d:\n%s", h.Kind, h.Name, strings.Join(h.Args, " "), h.User, h.ExitCode, h.Output)
}
