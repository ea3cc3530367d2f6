package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// What the webhook reads of one object at most. Past them it counts and
// reports (mutate.Unread), or keeps a clipped copy (mutate.Clipped,
// mutate.ClippedList) where the rest cannot change a decision: each limit
// is far above what real Pods carry, and together they bound what one
// review keeps (docs/security.md).
const (
	// MaxContainersRead bounds each of a Pod's lists of containers,
	// init containers and ephemeral containers.
	MaxContainersRead = 256
	// MaxPortsRead bounds the ports of one container.
	MaxPortsRead = 256
	// MaxKeptBytes bounds what one review keeps of its objects, whatever
	// the limits above allow together.
	MaxKeptBytes = 4 << 20

	// maxNameBytes bounds names graceguard keeps: object names (253 is the
	// API's longest) and container and port names (63 and 15).
	maxNameBytes = 253
	// maxShortBytes bounds the strings graceguard only compares or quotes:
	// paths, hosts, header values, arguments after the fourth.
	maxShortBytes = 256
	// maxScriptBytes bounds the first arguments of a command, where a
	// shell's script is (the length of `sh -c "sleep 5; ..."` is read
	// from it).
	maxScriptBytes = 4096
	// maxImageBytes bounds a container's image reference, which graceguard
	// reads for its name only (mutate's exec hook advice): a repository of
	// 255 bytes, a tag of 128, a digest of 71, with room to spare.
	maxImageBytes = 512
	// maxArgsRead bounds the arguments kept of a container's command and
	// args: graceguard reads the first four (is it `sh -c` without exec?).
	maxArgsRead = 4
	// maxExecRead bounds the arguments kept of a hook's or probe's exec:
	// `sleep 1 1 1 ...` longer than this is of unknown length.
	maxExecRead = 16
	// maxHeadersRead bounds an httpGet's headers (compared, never used).
	maxHeadersRead = 8
	// maxEnvRead bounds the environment entries kept of a container: of
	// the few graceguard reads (mutate.EnvRead), the last this many.
	maxEnvRead = 8
)

// decodeAdmissionPod reads what graceguard decides on of a review's Pod
// (see reader), charging what it keeps to m, and what it did not read.
func decodeAdmissionPod(raw []byte, m *meter) (*corev1.Pod, []mutate.Unread, error) {
	if len(raw) == 0 {
		return nil, nil, errors.New("there is no content to decode")
	}
	r := newReader(raw, m)
	pod := &corev1.Pod{}
	var apiVersion, kind string
	_, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "apiVersion":
			apiVersion, err = r.str(maxNameBytes)
		case "kind":
			kind, err = r.str(maxNameBytes)
		case "metadata":
			err = r.meta(&pod.ObjectMeta, mutate.PodLabel, mutate.PodAnnotation, true)
		case "spec":
			err = r.podSpec(&pod.Spec)
		default:
			err = r.skip()
		}
		return err
	})
	if err := r.finish(err); err != nil {
		return nil, nil, err
	}
	if (apiVersion != "" && apiVersion != "v1") || (kind != "" && kind != "Pod") {
		return nil, nil, fmt.Errorf("the object is %s %s, not v1 Pod", clipString(apiVersion), clipString(kind))
	}
	pod.APIVersion, pod.Kind = apiVersion, kind
	return pod, r.unreadOf(), nil
}

// finish ends a read: the object's JSON must be whole, and an object that
// kept too much is cut there and reported.
func (r *jsonReader) finish(err error) error {
	if errors.Is(err, errKept) {
		if r.m.busy {
			return errBusy
		}
		r.unread = append(r.unread, unread{path: r.path(), limit: MaxKeptBytes})
		return nil
	}
	return err
}

func (r *jsonReader) unreadOf() []mutate.Unread {
	if len(r.unread) == 0 {
		return nil
	}
	out := make([]mutate.Unread, len(r.unread))
	for i, u := range r.unread {
		out[i] = mutate.Unread{Path: u.path, N: u.n, Limit: u.limit, What: u.what}
	}
	return out
}

// meta reads an object's metadata: names, the labels and annotations
// graceguard reads, and (Pods only) the controller's reference.
func (r *jsonReader) meta(m *metav1.ObjectMeta, labels, annotations mutate.Where, owner bool) error {
	_, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "name":
			m.Name, err = r.str(maxNameBytes)
		case "generateName":
			m.GenerateName, err = r.str(maxNameBytes)
		case "namespace":
			m.Namespace, err = r.str(maxNameBytes)
		case "labels":
			m.Labels, err = r.keyed(labels)
		case "annotations":
			m.Annotations, err = r.keyed(annotations)
		case "ownerReferences":
			if !owner {
				return r.skip()
			}
			m.OwnerReferences, err = r.controllerRef()
		default:
			err = r.skip()
		}
		return err
	})
	return err
}

// controllerRef reads the owner references and keeps the controller's, the
// one metav1.GetControllerOf returns (graceguard.io/max-work: auto reads
// its workload's report).
func (r *jsonReader) controllerRef() ([]metav1.OwnerReference, error) {
	var out []metav1.OwnerReference
	_, err := r.array(func(int) error {
		var ref metav1.OwnerReference
		_, err := r.object(func(name []byte) error {
			var err error
			switch string(name) {
			case "apiVersion":
				ref.APIVersion, err = r.str(maxNameBytes)
			case "kind":
				ref.Kind, err = r.str(maxNameBytes)
			case "name":
				ref.Name, err = r.str(maxNameBytes)
			case "uid":
				var uid string
				uid, err = r.str(maxNameBytes)
				ref.UID = types.UID(uid)
			case "controller":
				ref.Controller, err = r.boolean()
			default:
				err = r.skip()
			}
			return err
		})
		if err == nil && out == nil && ref.Controller != nil && *ref.Controller {
			out = []metav1.OwnerReference{ref}
		}
		return err
	})
	return out, err
}

// podSpec reads what graceguard decides on of a Pod's spec.
func (r *jsonReader) podSpec(s *corev1.PodSpec) error {
	_, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "terminationGracePeriodSeconds":
			s.TerminationGracePeriodSeconds, err = r.int64()
		case "containers":
			s.Containers, err = r.containers()
		case "initContainers":
			s.InitContainers, err = r.containers()
		case "ephemeralContainers":
			s.EphemeralContainers, err = r.ephemeralContainers()
		case "os":
			s.OS, err = r.podOS()
		case "nodeSelector":
			s.NodeSelector, err = r.nodeOS()
		case "hostNetwork":
			// Linkerd does not inject a Pod on the host network
			// (pkg/mutate/mesh.go).
			var b *bool
			if b, err = r.boolean(); b != nil {
				s.HostNetwork = *b
			}
		default:
			err = r.skip()
		}
		return err
	})
	return err
}

func (r *jsonReader) podOS() (*corev1.PodOS, error) {
	var os corev1.PodOS
	present, err := r.object(func(name []byte) error {
		if string(name) != "name" {
			return r.skip()
		}
		n, err := r.str(maxNameBytes)
		os.Name = corev1.OSName(n)
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return &os, nil
}

// nodeOS reads of a node selector only kubernetes.io/os, which marks a
// Windows Pod as spec.os.name does: one value, whatever the selector's size.
func (r *jsonReader) nodeOS() (map[string]string, error) {
	var out map[string]string
	_, err := r.object(func(name []byte) error {
		if string(name) != corev1.LabelOSStable {
			return r.skip()
		}
		v, err := r.str(maxNameBytes)
		out = map[string]string{corev1.LabelOSStable: v}
		return err
	})
	return out, err
}

// containers reads a list of containers, the first MaxContainersRead of
// them; the rest are counted and reported.
func (r *jsonReader) containers() ([]corev1.Container, error) {
	var out []corev1.Container
	n := 0
	present, err := r.array(func(i int) error {
		n++
		if i >= MaxContainersRead {
			return r.skip()
		}
		var ok bool
		if out, ok = grow(r.m, out); !ok {
			return errKept
		}
		out = append(out, corev1.Container{})
		return r.container(&out[len(out)-1])
	})
	if err != nil {
		return nil, err
	}
	if n > MaxContainersRead {
		r.count(n, MaxContainersRead, "containers")
	}
	if present && out == nil {
		out = []corev1.Container{}
	}
	return out, nil
}

func (r *jsonReader) ephemeralContainers() ([]corev1.EphemeralContainer, error) {
	var out []corev1.EphemeralContainer
	n := 0
	present, err := r.array(func(i int) error {
		n++
		if i >= MaxContainersRead {
			return r.skip()
		}
		var ok bool
		if out, ok = grow(r.m, out); !ok {
			return errKept
		}
		var e corev1.EphemeralContainer
		_, err := r.object(func(name []byte) error {
			if string(name) != "name" {
				return r.skip()
			}
			var err error
			e.Name, err = r.str(maxNameBytes)
			return err
		})
		out = append(out, e)
		return err
	})
	if err != nil {
		return nil, err
	}
	if n > MaxContainersRead {
		r.count(n, MaxContainersRead, "containers")
	}
	if present && out == nil {
		out = []corev1.EphemeralContainer{}
	}
	return out, nil
}

// argLimit keeps the first arguments longer: a shell's script is there.
func argLimit(i int) int {
	if i < maxArgsRead {
		return maxScriptBytes
	}
	return maxShortBytes
}

func (r *jsonReader) container(c *corev1.Container) error {
	_, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "name":
			c.Name, err = r.str(maxNameBytes)
		case "image":
			c.Image, err = r.str(maxImageBytes)
		case "command":
			c.Command, err = r.strs(maxArgsRead, argLimit)
		case "args":
			c.Args, err = r.strs(maxArgsRead, argLimit)
		case "ports":
			c.Ports, err = r.ports()
		case "env":
			c.Env, err = r.env()
		case "lifecycle":
			c.Lifecycle, err = r.lifecycle()
		case "readinessProbe":
			c.ReadinessProbe, err = r.probe()
		case "livenessProbe":
			c.LivenessProbe, err = r.probe()
		case "startupProbe":
			c.StartupProbe, err = r.probe()
		case "restartPolicy":
			var p *string
			if p, err = r.optStr(maxNameBytes); p != nil {
				rp := corev1.ContainerRestartPolicy(*p)
				c.RestartPolicy = &rp
			}
		default:
			err = r.skip()
		}
		return err
	})
	return err
}

// ports reads a container's ports, the first MaxPortsRead of them; the rest
// are counted and reported.
func (r *jsonReader) ports() ([]corev1.ContainerPort, error) {
	var out []corev1.ContainerPort
	n := 0
	present, err := r.array(func(i int) error {
		n++
		if i >= MaxPortsRead {
			return r.skip()
		}
		var ok bool
		if out, ok = grow(r.m, out); !ok {
			return errKept
		}
		var p corev1.ContainerPort
		_, err := r.object(func(name []byte) error {
			var err error
			switch string(name) {
			case "name":
				p.Name, err = r.str(maxNameBytes)
			case "containerPort":
				p.ContainerPort, err = r.int32()
			case "hostPort":
				p.HostPort, err = r.int32()
			case "protocol":
				var s string
				s, err = r.str(maxNameBytes)
				p.Protocol = corev1.Protocol(s)
			case "hostIP":
				p.HostIP, err = r.str(maxNameBytes)
			default:
				err = r.skip()
			}
			return err
		})
		out = append(out, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	if n > MaxPortsRead {
		r.count(n, MaxPortsRead, "ports")
	}
	if present && out == nil {
		out = []corev1.ContainerPort{}
	}
	return out, nil
}

// env keeps the entries of a container's environment graceguard reads
// (mutate.EnvRead: istio-proxy's exit, Knative's queue-proxy): the last
// maxEnvRead of them, in order. env is most of a big Pod's bytes; none of
// the rest is kept.
func (r *jsonReader) env() ([]corev1.EnvVar, error) {
	var out []corev1.EnvVar
	_, err := r.array(func(int) error {
		var e corev1.EnvVar
		keep := false
		// The value as sent (the input's own bytes): unquoted only if kept.
		var value jsontext.Value
		_, err := r.object(func(name []byte) error {
			v, err := r.dec.ReadValue()
			if err != nil {
				return r.wrap(err)
			}
			switch string(name) {
			case "name":
				if v.Kind() == '"' {
					e.Name, keep = envRead(r.unquoteName(v))
				}
			case "value":
				if v.Kind() == '"' {
					value = v
				}
			}
			return nil
		})
		if err != nil || !keep {
			return err
		}
		if value != nil {
			e.Value = readString(value, mutate.MaxIstioProxyConfigLength)
		}
		if len(out) == maxEnvRead {
			out = append(out[:0], out[1:]...)
		}
		var ok bool
		if out, ok = grow(r.m, out); !ok {
			return errKept
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// envRead returns name as a string when it is one of the environment
// variables graceguard reads.
func envRead(name []byte) (string, bool) {
	for _, n := range mutate.EnvRead {
		if string(name) == n {
			return n, true
		}
	}
	return "", false
}

func (r *jsonReader) lifecycle() (*corev1.Lifecycle, error) {
	var l corev1.Lifecycle
	present, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "preStop":
			l.PreStop, err = r.handler()
		case "stopSignal":
			var s *string
			if s, err = r.optStr(maxNameBytes); s != nil {
				sig := corev1.Signal(*s)
				l.StopSignal = &sig
			}
		default:
			// postStart: graceguard adds preStop beside it, never reads it.
			err = r.skip()
		}
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return &l, nil
}

// handler reads a preStop hook.
func (r *jsonReader) handler() (*corev1.LifecycleHandler, error) {
	var h corev1.LifecycleHandler
	present, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "exec":
			h.Exec, err = r.exec()
		case "httpGet":
			h.HTTPGet, err = r.httpGet()
		case "tcpSocket":
			h.TCPSocket, err = r.tcpSocket()
		case "sleep":
			h.Sleep, err = r.sleep()
		default:
			err = r.skip()
		}
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	if !r.m.charge(int(unsafe.Sizeof(h)) + int(unsafe.Sizeof(corev1.ExecAction{})+unsafe.Sizeof(corev1.HTTPGetAction{}))) {
		return nil, errKept
	}
	return &h, nil
}

func execLimit(i int) int {
	if i < maxArgsRead {
		return maxScriptBytes
	}
	return maxShortBytes
}

func (r *jsonReader) exec() (*corev1.ExecAction, error) {
	var e corev1.ExecAction
	present, err := r.object(func(name []byte) error {
		if string(name) != "command" {
			return r.skip()
		}
		var err error
		e.Command, err = r.strs(maxExecRead, execLimit)
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return &e, nil
}

func (r *jsonReader) sleep() (*corev1.SleepAction, error) {
	var s corev1.SleepAction
	present, err := r.object(func(name []byte) error {
		if string(name) != "seconds" {
			return r.skip()
		}
		n, err := r.int64()
		if n != nil {
			s.Seconds = *n
		}
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return &s, nil
}

// port reads an IntOrString port: a number or a name.
func (r *jsonReader) port() (intstr.IntOrString, error) {
	if r.dec.PeekKind() == '"' {
		s, err := r.str(maxNameBytes)
		return intstr.FromString(s), err
	}
	n, err := r.int32()
	return intstr.FromInt32(n), err
}

func (r *jsonReader) httpGet() (*corev1.HTTPGetAction, error) {
	var h corev1.HTTPGetAction
	present, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "path":
			h.Path, err = r.str(maxShortBytes)
		case "port":
			h.Port, err = r.port()
		case "host":
			h.Host, err = r.str(maxNameBytes)
		case "scheme":
			var s string
			s, err = r.str(maxNameBytes)
			h.Scheme = corev1.URIScheme(s)
		case "httpHeaders":
			h.HTTPHeaders, err = r.headers()
		default:
			err = r.skip()
		}
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return &h, nil
}

// headers reads an httpGet's headers, the first maxHeadersRead of them; a
// longer list ends with a header naming how many more and their hash.
func (r *jsonReader) headers() ([]corev1.HTTPHeader, error) {
	var out []corev1.HTTPHeader
	more, sum := 0, uint64(fnvOffset)
	present, err := r.array(func(i int) error {
		if i >= maxHeadersRead {
			v, err := r.dec.ReadValue()
			if err != nil {
				return r.wrap(err)
			}
			more, sum = more+1, fnv(sum, v)
			return nil
		}
		var ok bool
		if out, ok = grow(r.m, out); !ok {
			return errKept
		}
		var h corev1.HTTPHeader
		_, err := r.object(func(name []byte) error {
			var err error
			switch string(name) {
			case "name":
				h.Name, err = r.str(maxShortBytes)
			case "value":
				h.Value, err = r.str(maxShortBytes)
			default:
				err = r.skip()
			}
			return err
		})
		out = append(out, h)
		return err
	})
	if err != nil {
		return nil, err
	}
	if more > 0 {
		out = append(out, corev1.HTTPHeader{Name: mutate.ClippedList(more, sum)})
	}
	if present && out == nil {
		out = []corev1.HTTPHeader{}
	}
	return out, nil
}

func (r *jsonReader) tcpSocket() (*corev1.TCPSocketAction, error) {
	var t corev1.TCPSocketAction
	present, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "port":
			t.Port, err = r.port()
		case "host":
			t.Host, err = r.str(maxNameBytes)
		default:
			err = r.skip()
		}
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return &t, nil
}

func (r *jsonReader) grpc() (*corev1.GRPCAction, error) {
	var g corev1.GRPCAction
	present, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "port":
			g.Port, err = r.int32()
		case "service":
			g.Service, err = r.optStr(maxShortBytes)
		default:
			err = r.skip()
		}
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	return &g, nil
}

// probe reads a probe: its handler (compared: is liveness the same check
// as readiness?), its timing and its own grace.
func (r *jsonReader) probe() (*corev1.Probe, error) {
	var p corev1.Probe
	present, err := r.object(func(name []byte) error {
		var err error
		switch string(name) {
		case "exec":
			p.Exec, err = r.exec()
		case "httpGet":
			p.HTTPGet, err = r.httpGet()
		case "tcpSocket":
			p.TCPSocket, err = r.tcpSocket()
		case "grpc":
			p.GRPC, err = r.grpc()
		case "initialDelaySeconds":
			p.InitialDelaySeconds, err = r.int32()
		case "timeoutSeconds":
			p.TimeoutSeconds, err = r.int32()
		case "periodSeconds":
			p.PeriodSeconds, err = r.int32()
		case "successThreshold":
			p.SuccessThreshold, err = r.int32()
		case "failureThreshold":
			p.FailureThreshold, err = r.int32()
		case "terminationGracePeriodSeconds":
			p.TerminationGracePeriodSeconds, err = r.int64()
		default:
			err = r.skip()
		}
		return err
	})
	if !present || err != nil {
		return nil, err
	}
	if !r.m.charge(int(unsafe.Sizeof(p)) + int(unsafe.Sizeof(corev1.ExecAction{})+unsafe.Sizeof(corev1.HTTPGetAction{}))) {
		return nil, errKept
	}
	return &p, nil
}

// leanWorkload is a decoded workload: its Pod template as a target, and the
// template's JSON as sent (part of the review's body, not a copy).
type leanWorkload struct {
	target mutate.Target
	raw    []byte
	// noTemplate: the object has no Pod template (a Rollout with
	// spec.workloadRef, whose Pods use a Deployment's).
	noTemplate bool
}

// decodeAdmissionWorkload reads what graceguard decides on of a workload of
// kind w: its name and its Pod template, read as a Pod is (labels and
// annotations alike), wherever the kind keeps it (w.TemplatePath).
func decodeAdmissionWorkload(w mutate.WorkloadKind, raw []byte, m *meter) (leanWorkload, error) {
	if len(raw) == 0 {
		return leanWorkload{}, errors.New("there is no content to decode")
	}
	r := newReader(raw, m)
	var meta metav1.ObjectMeta
	tpl := &corev1.PodTemplateSpec{}
	var apiVersion, kind string
	var start, end int64
	var found bool
	readTemplate := func() error {
		// A repeated name: the last template is the template.
		*tpl, found = corev1.PodTemplateSpec{}, true
		start = r.dec.InputOffset()
		err := r.template(tpl)
		end = r.dec.InputOffset()
		return err
	}
	var strategy mutate.RolloutStrategy
	rollout := w.Kind == "Rollout"
	_, err := r.object(func(name []byte) error {
		if rollout && string(name) == "spec" {
			// A Rollout's spec: its template and its strategy's delays.
			_, err := r.object(func(name []byte) error {
				switch string(name) {
				case "template":
					return readTemplate()
				case "strategy":
					return r.rolloutStrategy(&strategy)
				}
				return r.skip()
			})
			return err
		}
		if string(name) == w.TemplatePath[0] {
			return r.path2(w.TemplatePath[1:], readTemplate)
		}
		var err error
		switch string(name) {
		case "apiVersion":
			apiVersion, err = r.str(maxNameBytes)
		case "kind":
			kind, err = r.str(maxNameBytes)
		case "metadata":
			err = r.meta(&meta, 0, 0, false)
		default:
			err = r.skip()
		}
		return err
	})
	if err := r.finish(err); err != nil {
		return leanWorkload{}, err
	}
	gv := w.GroupVersion()
	if (apiVersion != "" && apiVersion != gv) || (kind != "" && kind != w.Kind) {
		return leanWorkload{}, fmt.Errorf("the object is %s %s, not %s %s", clipString(apiVersion), clipString(kind), gv, w.Kind)
	}
	t, err := mutate.ForTemplate(w.Kind, meta.Namespace, meta.Name, tpl)
	if err != nil {
		return leanWorkload{}, err
	}
	t.Unread = r.unreadOf()
	t.ScaleDown = strategy.ScaleDownDelays()
	var tplRaw []byte
	if found {
		// start is just after the name's colon: before any space.
		tplRaw = bytes.TrimLeft(raw[start:end], " \t\r\n")
	}
	return leanWorkload{target: t, raw: tplRaw, noTemplate: !found}, nil
}

// rolloutStrategy reads what graceguard holds to the routing term of an
// Argo Rollouts strategy: the scale-down delays, and whether a canary
// routes traffic. A repeated name merges into what was read, as
// encoding/json does.
func (r *jsonReader) rolloutStrategy(s *mutate.RolloutStrategy) error {
	delay := func(p **int32) error {
		n, err := r.int64()
		if err != nil || n == nil {
			*p = nil
			return err
		}
		if int64(int32(*n)) != *n {
			return r.fail("want a 32-bit integer, got %d", *n)
		}
		v := int32(*n)
		*p = &v
		return nil
	}
	_, err := r.object(func(name []byte) error {
		switch string(name) {
		case "blueGreen":
			bg := s.BlueGreen
			if bg == nil {
				bg = &mutate.RolloutBlueGreen{}
			}
			present, err := r.object(func(name []byte) error {
				if string(name) == "scaleDownDelaySeconds" {
					return delay(&bg.ScaleDownDelaySeconds)
				}
				return r.skip()
			})
			s.BlueGreen = nil
			if present {
				s.BlueGreen = bg
			}
			return err
		case "canary":
			c := s.Canary
			if c == nil {
				c = &mutate.RolloutCanary{}
			}
			present, err := r.object(func(name []byte) error {
				switch string(name) {
				case "scaleDownDelaySeconds":
					return delay(&c.ScaleDownDelaySeconds)
				case "trafficRouting":
					c.TrafficRouting = nil
					if r.dec.PeekKind() != 'n' {
						c.TrafficRouting = []byte("{}")
					}
				}
				return r.skip()
			})
			s.Canary = nil
			if present {
				s.Canary = c
			}
			return err
		}
		return r.skip()
	})
	return err
}

// path2 walks down the members named by path and calls at with the value
// there; everything beside the path is skipped.
func (r *jsonReader) path2(path []string, at func() error) error {
	if len(path) == 0 {
		return at()
	}
	_, err := r.object(func(name []byte) error {
		if string(name) != path[0] {
			return r.skip()
		}
		return r.path2(path[1:], at)
	})
	return err
}

// template reads a Pod template: its labels and annotations as a Pod's,
// its spec as a Pod's.
func (r *jsonReader) template(tpl *corev1.PodTemplateSpec) error {
	_, err := r.object(func(name []byte) error {
		switch string(name) {
		case "metadata":
			return r.meta(&tpl.ObjectMeta, mutate.PodLabel, mutate.PodAnnotation, false)
		case "spec":
			return r.podSpec(&tpl.Spec)
		}
		return r.skip()
	})
	return err
}

// clipString quotes a string of the input for a message, at most 64 bytes.
func clipString(s string) string {
	if len(s) > 64 {
		s = s[:61] + "..."
	}
	return fmt.Sprintf("%q", s)
}
