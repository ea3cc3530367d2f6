package cli

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// probeSet is what measure-routing creates, in order.
type probeSet struct {
	namespace  *corev1.Namespace
	deployment *appsv1.Deployment
	service    *corev1.Service
}

// probeObjects are the probe's namespace, Deployment and Service. The Pods
// sleep --hold in preStop (the API server's native sleep: the image has no
// shell) and get --hold plus 10 s of grace, so a deleted Pod answers
// whatever the path sends it for the whole hold; they meet the
// restricted Pod Security Standard.
func probeObjects(f *measureFlags) probeSet {
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: probeNSPrefix, Labels: probeLabels},
	}
	hold := int64(f.hold.Seconds())
	grace := int64((f.hold + probeGraceExtra).Seconds())
	selector := map[string]string{labelName: probeAppName}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: probeLabels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(grace),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  probeName,
				Image: f.image,
				Args:  []string{"probe", fmt.Sprintf("--listen=:%d", probePort)},
				Env: []corev1.EnvVar{{Name: probeFieldPodEnv,
					ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: probePort}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
					PeriodSeconds: 1, FailureThreshold: 1,
				},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: hold}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					RunAsUser:                ptr.To(int64(65532)),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: probeName, Labels: probeLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(f.replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: pod,
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: probeName, Labels: probeLabels},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	return probeSet{namespace: ns, deployment: dep, service: svc}
}

// writeDryRun prints the objects as YAML and what to route to them.
func writeDryRun(w io.Writer, objs probeSet, f *measureFlags) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# kubectl graceguard measure-routing would create these objects, then delete its namespace at the end.\n")
	fmt.Fprintf(&b, "# The namespace's name is generated (%s...).\n", probeNSPrefix)
	for _, o := range []runtime.Object{objs.namespace, objs.deployment, objs.service} {
		y, err := cleanYAML(o)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	target := f.url
	if target == "" {
		target = "--url"
	}
	fmt.Fprintf(&b, "# While it runs, route %s to Service %s port 80 in that namespace, e.g.:\n#\n", target, probeName)
	for _, l := range strings.Split(strings.TrimRight(routeExample(probeNSPrefix+"xxxxx", f.url), "\n"), "\n") {
		b.WriteString(strings.TrimRight("#   "+l, " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
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
`, namespace, probeName, rule, hostnames)
}
