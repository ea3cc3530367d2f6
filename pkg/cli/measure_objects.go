package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/routingprobe/kubeprobe"
)

// probeSet is what measure-routing creates, in order; the in-cluster
// client's objects only with --in-cluster.
type probeSet struct {
	namespace  *corev1.Namespace
	deployment *appsv1.Deployment
	service    *corev1.Service
	// ingress routes --url to the Service, with --ingress-class only.
	ingress *networkingv1.Ingress
	client  []client.Object
}

// clientName names the in-cluster client's ServiceAccount, Role,
// RoleBinding, Job and container.
const clientName = "probe-client"

// probeGraceExtra is the probe Pods' grace beyond their preStop sleep: the
// probe server stops within 5 s of SIGTERM.
const probeGraceExtra = 10 * time.Second

// restricted is a container security context meeting the restricted Pod
// Security Standard, as graceguard's image runs (distroless, 65532).
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsUser:                ptr.To(int64(65532)),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

var smallResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
}

// probeObjects are the probe's namespace, Deployment and Service. The Pods
// sleep --hold in preStop (the API server's native sleep: the image has no
// shell) and get --hold plus 10 s of grace, so a deleted Pod answers
// whatever the path sends it for the whole hold; they meet the
// restricted Pod Security Standard.
func probeObjects(f *measureFlags) probeSet {
	labels := kubeprobe.Labels()
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: kubeprobe.NSPrefix, Labels: labels},
	}
	hold := int64(f.s.Hold.Seconds())
	grace := int64((f.s.Hold + probeGraceExtra).Seconds())
	selector := map[string]string{kubeprobe.LabelName: kubeprobe.ProbeAppName}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(grace),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			SecurityContext:               podSecurity(),
			Containers: []corev1.Container{{
				Name:  kubeprobe.ProbeName,
				Image: f.image,
				Args:  []string{"probe", fmt.Sprintf("--listen=:%d", kubeprobe.ProbePort)},
				Env:   []corev1.EnvVar{fieldEnv(kubeprobe.PodNameEnv, "metadata.name")},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: kubeprobe.ProbePort}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
					PeriodSeconds: 1, FailureThreshold: 1,
				},
				Lifecycle:       &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: hold}}},
				Resources:       smallResources,
				SecurityContext: restricted(),
			}},
		},
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: kubeprobe.ProbeName, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(f.s.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: pod,
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: kubeprobe.ProbeName, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	set := probeSet{namespace: ns, deployment: dep, service: svc}
	if f.ingressClass != "" && !f.inCluster {
		set.ingress = probeIngress(f, labels)
	}
	if f.inCluster {
		set.client = clientObjects(f)
	}
	return set
}

// probeIngress routes --url's host (--host, when given; every host when
// the URL names an address) to the probe's Service, through the user's
// IngressClass.
func probeIngress(f *measureFlags, labels map[string]string) *networkingv1.Ingress {
	host := f.s.Host
	if host == "" {
		if u, err := url.Parse(f.s.URL); err == nil && net.ParseIP(u.Hostname()) == nil {
			host = u.Hostname()
		}
	}
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: kubeprobe.ProbeName, Labels: labels},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(f.ingressClass),
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: kubeprobe.ProbeName, Port: networkingv1.ServiceBackendPort{Number: 80}},
				}}},
			}}}},
		},
	}
}

// ingressHostText names what an Ingress routes: its host, or every host.
func ingressHostText(ing *networkingv1.Ingress) string {
	if h := ing.Spec.Rules[0].Host; h != "" {
		return "host " + h
	}
	return "every host"
}

// clientObjects are the in-cluster client's: a ServiceAccount whose Role
// lets it list and delete Pods in the probe's namespace only, and a Job
// running `webhook measure` with the plugin's settings once, bounded by
// --timeout.
func clientObjects(f *measureFlags) []client.Object {
	labels := kubeprobe.Labels()
	labels[kubeprobe.LabelName] = kubeprobe.ClientAppName
	meta := metav1.ObjectMeta{Name: clientName, Labels: labels}
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta,
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete"}}},
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: clientName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: clientName}},
	}
	s := f.s
	s.URL = kubeprobe.ServiceURL
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(int32(0)),
			ActiveDeadlineSeconds: ptr.To(int64(f.timeout.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: clientName,
					SecurityContext:    podSecurity(),
					// The kubelet sets kubeprobe.ServiceHostEnv, which
					// the --url argument names.
					EnableServiceLinks: ptr.To(true),
					Containers: []corev1.Container{{
						Name:            clientName,
						Image:           f.image,
						Args:            append([]string{"measure"}, s.Args()...),
						Env:             []corev1.EnvVar{fieldEnv("POD_NAMESPACE", "metadata.namespace")},
						Resources:       smallResources,
						SecurityContext: restricted(),
					}},
				},
			},
		},
	}
	return []client.Object{sa, role, binding, job}
}

// create creates the set's objects but the namespace in namespace.
func (s probeSet) create(ctx context.Context, kube kubernetes.Interface, namespace string) error {
	objs := []client.Object{s.deployment, s.service}
	if s.ingress != nil {
		objs = append(objs, s.ingress)
	}
	objs = append(objs, s.client...)
	for _, o := range objs {
		o.SetNamespace(namespace)
		var err error
		switch o := o.(type) {
		case *appsv1.Deployment:
			_, err = kube.AppsV1().Deployments(namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = kube.CoreV1().Services(namespace).Create(ctx, o, metav1.CreateOptions{})
		case *networkingv1.Ingress:
			_, err = kube.NetworkingV1().Ingresses(namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = kube.CoreV1().ServiceAccounts(namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = kube.RbacV1().Roles(namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = kube.RbacV1().RoleBindings(namespace).Create(ctx, o, metav1.CreateOptions{})
		case *batchv1.Job:
			_, err = kube.BatchV1().Jobs(namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("no client for %T", o)
		}
		if err != nil {
			return fmt.Errorf("creating %s %s/%s: %w", o.GetObjectKind().GroupVersionKind().Kind, namespace, o.GetName(), err)
		}
	}
	return nil
}

// writeDryRun prints the objects as YAML and what to route to them.
func writeDryRun(w io.Writer, objs probeSet, f *measureFlags) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# kubectl graceguard measure-routing would create these objects, then delete its namespace at the end.\n")
	fmt.Fprintf(&b, "# The namespace's name is generated (%s...).\n", kubeprobe.NSPrefix)
	all := []runtime.Object{objs.namespace, objs.deployment, objs.service}
	if objs.ingress != nil {
		all = append(all, objs.ingress)
	}
	all = append(all, clientRuntimeObjects(objs.client)...)
	for _, o := range all {
		y, err := cleanYAML(o)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	switch {
	case objs.ingress != nil:
		via := f.s.URL
		if f.s.Host != "" {
			via += " with Host: " + f.s.Host
		}
		fmt.Fprintf(&b, "# Ingress %s (class %s) routes %s to the probe; the load goes to %s from here.\n", kubeprobe.ProbeName, f.ingressClass, ingressHostText(objs.ingress), via)
	case f.inCluster:
		fmt.Fprintf(&b, "# Job %s sends the load to Service %s and deletes the Pods; the command prints what it measured.\n", clientName, kubeprobe.ProbeName)
	default:
		target := f.s.URL
		if target == "" {
			target = "--url"
		}
		fmt.Fprintf(&b, "# While it runs, route %s to Service %s port 80 in that namespace, e.g.:\n#\n", target, kubeprobe.ProbeName)
		for _, l := range strings.Split(strings.TrimRight(routeExample(kubeprobe.NSPrefix+"xxxxx", f.s.URL), "\n"), "\n") {
			b.WriteString(strings.TrimRight("#   "+l, " ") + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func clientRuntimeObjects(objs []client.Object) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// cleanYAML is o's YAML without the fields nobody wrote (a null
// creationTimestamp, an empty status or spec).
func cleanYAML(o runtime.Object) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	delete(u, "status")
	dropUnwritten(u)
	return yaml.Marshal(u)
}

func dropUnwritten(m map[string]any) {
	for k, v := range m {
		if k == "creationTimestamp" && v == nil {
			delete(m, k)
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			dropUnwritten(sub)
			if len(sub) == 0 {
				delete(m, k)
			}
		}
	}
}

// routeExample is an Ingress and an HTTPRoute sending url's host to the
// probe's Service: the user's class and Gateway are placeholders.
func routeExample(namespace, rawURL string) string {
	host := "probe.example.com"
	if u, err := url.Parse(rawURL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	// An address is no Ingress host or HTTPRoute hostname: route every
	// host then.
	rule, hostnames := host+"/*", "\n  hostnames: ["+host+"]"
	if net.ParseIP(host) != nil {
		rule, hostnames = "/*", ""
	}
	return fmt.Sprintf(`kubectl -n %[1]s create ingress %[2]s --class=YOUR-CLASS --rule='%[3]s=%[2]s:80'

or a Gateway API HTTPRoute:

apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  parentRefs: [{name: YOUR-GATEWAY, namespace: YOUR-GATEWAY-NAMESPACE}]%[4]s
  rules: [{backendRefs: [{name: %[2]s, port: 80}]}]

or a load balancer at an address you reserved, which --url names:

kubectl -n %[1]s expose deployment %[2]s --name=%[2]s-lb --type=LoadBalancer --port=80 --target-port=http
`, namespace, kubeprobe.ProbeName, rule, hostnames)
}
