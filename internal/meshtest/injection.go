package meshtest

import (
	"embed"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Injection is what a real injector added to the canonical Pod
// (CanonicalPod), less what depends on the Pod: the containers before and
// after the Pod's own, the volumes, annotations and labels. The files
// under testdata/ hold one per mesh and form, written by test/meshoracle.
type Injection struct {
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	// InitContainersFirst go before the Pod's own init containers,
	// InitContainersLast after them; the same for the app containers.
	InitContainersFirst []corev1.Container `json:"initContainersFirst,omitempty"`
	InitContainersLast  []corev1.Container `json:"initContainersLast,omitempty"`
	ContainersFirst     []corev1.Container `json:"containersFirst,omitempty"`
	ContainersLast      []corev1.Container `json:"containersLast,omitempty"`
	Volumes             []corev1.Volume    `json:"volumes,omitempty"`
}

// CanonicalPod is the Pod the generator gives each real injector: one
// init container and one app container of its own, so that the
// injection's placement around them shows.
func CanonicalPod(namespace string) *corev1.Pod {
	grace := int64(30) // the API server defaults it before any webhook
	p := &corev1.Pod{Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		InitContainers:                []corev1.Container{{Name: "setup", Image: "registry.local/setup:1"}},
		Containers: []corev1.Container{{Name: "app", Image: "registry.local/web:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
	}}
	p.Name, p.Namespace = "web", namespace
	p.Labels, p.Annotations = map[string]string{"app": "web"}, map[string]string{}
	return p
}

// InjectionFile is the file, under internal/meshtest, that holds a mesh's
// injection in one form.
func InjectionFile(m Mesh, native bool) string {
	form := "classic"
	if native {
		form = "native"
	}
	return "testdata/" + string(m) + "-" + form + ".yaml"
}

//go:embed testdata/*.yaml
var injectionFiles embed.FS

var (
	injectionsOnce sync.Once
	injections     map[string]Injection
)

// loadInjections reads the generated files, once; it panics when one is
// missing or does not parse, naming the file and the command that writes
// it. Read lazily, so that the generator runs when the files are broken.
func loadInjections() {
	out := map[string]Injection{}
	for _, m := range []Mesh{Istio, Linkerd} {
		for _, native := range []bool{false, true} {
			name := InjectionFile(m, native)
			b, err := injectionFiles.ReadFile(name)
			if err != nil {
				panic(fmt.Sprintf("meshtest: %v (make generate-standins writes it)", err))
			}
			var in Injection
			if err := yaml.UnmarshalStrict(b, &in); err != nil {
				panic(fmt.Sprintf("meshtest: %s: %v (make generate-standins writes it)", name, err))
			}
			if len(in.ContainersFirst)+len(in.ContainersLast)+len(in.InitContainersFirst)+len(in.InitContainersLast) == 0 {
				panic(fmt.Sprintf("meshtest: %s adds no container (make generate-standins writes it)", name))
			}
			out[name] = in
		}
	}
	injections = out
}

// apply adds the mesh's injection in that form to the Pod.
func apply(p *corev1.Pod, m Mesh, native bool) {
	injectionsOnce.Do(loadInjections)
	in := injections[InjectionFile(m, native)]
	clone := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i := range cs {
			cs[i].DeepCopyInto(&out[i])
		}
		return out
	}
	p.Spec.InitContainers = slices.Concat(clone(in.InitContainersFirst), p.Spec.InitContainers, clone(in.InitContainersLast))
	p.Spec.Containers = slices.Concat(clone(in.ContainersFirst), p.Spec.Containers, clone(in.ContainersLast))
	for _, v := range in.Volumes {
		p.Spec.Volumes = append(p.Spec.Volumes, *v.DeepCopy())
	}
	for k, v := range in.Annotations {
		setAnnotation(p, k, v)
	}
	for k, v := range in.Labels {
		setLabel(p, k, v)
	}
}

// container is the Pod's container or init container of that name.
func container(p *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// setEnv sets a container's variable in place, or appends it.
func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i] = corev1.EnvVar{Name: name, Value: value}
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}
