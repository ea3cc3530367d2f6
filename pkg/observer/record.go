package observer

import (
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/shutdownreport"
)

// Bounds of what the observer keeps of a Pod. Kubernetes' own limits where
// it has them; the record's worst case follows from them (maxRecordBytes).
const (
	// maxContainers is how many treated containers a record keeps: the
	// webhook treats at most that many (mutate.MaxTreatedContainers). A Pod
	// that names more gives no sample (SkipTooManyContainers).
	maxContainers = mutate.MaxTreatedContainers
	// maxUIDLength: the API server makes every UID an RFC 4122 UUID.
	maxUIDLength = 36
	// maxResourceVersionLength: an etcd revision, a decimal uint64.
	maxResourceVersionLength = 20
	// maxNamespaceLength: a namespace name is a DNS label.
	maxNamespaceLength = 63

	// maxRecordBytes is the most heap a record holds: a terminating Pod's,
	// every kept field at its bound, each allocation rounded up to the Go
	// runtime's size class (docs/observer.md adds it up; the tests derive
	// it from the types and measure it).
	maxRecordBytes = 6440
	// maxRunningRecordBytes is a key-only record's: a Pod not terminating,
	// or in a namespace graceguard does not treat.
	maxRunningRecordBytes = 472
)

// record is what the observer keeps of a labelled Pod: the informer's
// transform (leanPod) builds it from each version of the Pod the API
// server sends, and the cache stores it instead of the Pod.
//
// A Pod that is not terminating, or whose namespace graceguard does not
// treat, keeps its key only (namespace, name, UID, resourceVersion): a
// sample reads the Pod's final object, and every state from the deletion
// request on is transformed again, in full, as it arrives. Only
// terminating Pods carry a shutdown, of bounded size whatever the Pod
// holds (maxRecordBytes).
//
// It is not a *corev1.Pod on purpose: an empty Pod struct alone is 1,240
// bytes, more than a whole running Pod's record. The informer needs only
// what metav1.Object gives (its key, the resourceVersion that tells
// updates from resyncs); nothing reads Pods from the observer's cache.
type record struct {
	objectMeta
	// ignored: the namespace was not one graceguard treats when this
	// version of the Pod arrived.
	ignored bool
	// shutdown is nil unless the Pod is terminating in a treated namespace.
	shutdown *shutdown
}

// shutdown is what a sample needs of a terminating Pod.
type shutdown struct {
	// deletedAt is deletionTimestamp and grace deletionGracePeriodSeconds,
	// in whole seconds (the API's precision).
	deletedAt, grace int64
	// owner is the Pod's controller reference, when it has one within
	// Kubernetes' limits (ownerOK); ownerTooLong says it had one beyond.
	owner ownerRef
	// budget is graceguard.io/budget, parsed (budgetOK), never the text.
	budget      budget.Budget
	budgetGrace int64
	// containers are the treated containers, in graceguard's order.
	containers []container

	hasGrace, ownerOK, ownerTooLong, budgetOK bool
	// tooMany: more treated containers than maxContainers, or a
	// graceguard.io/containers list too long to read.
	tooMany bool
}

// ownerRef is a controller reference, each field within Kubernetes' limits.
type ownerRef struct {
	APIVersion, Kind, Name string
	UID                    types.UID
}

// container is a treated container: its preStop hook's length (as
// mutate.PreStopLength reads it) and its final state.
type container struct {
	name string
	// reason is the runtime's reason, cut to v1alpha1.MaxReasonLength.
	reason string
	// finishedAt is the terminated state's finishedAt in Unix seconds,
	// when exited is set.
	finishedAt int64
	hook       time.Duration
	exitCode   int32
	hookKnown  bool
	exited     bool
	// oomKilled is the reason before it was cut.
	oomKilled bool
}

// podTransform returns the Pod informer's transform: Pods in namespaces ns
// does not treat keep their key only.
func podTransform(ns *namespaces) func(any) (any, error) {
	return func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			// Already a record (a resync hands the cache's own object back).
			return obj, nil
		}
		return leanPod(p, ns.treats(p.Namespace)), nil
	}
}

// leanPod builds the record of a Pod. Every string kept is a copy, so
// that no part of the Pod outlives the transform.
func leanPod(p *corev1.Pod, treated bool) *record {
	r := &record{objectMeta: metaOf(&p.ObjectMeta), ignored: !treated}
	if !treated || p.DeletionTimestamp == nil {
		return r
	}
	s := &shutdown{deletedAt: clampUnix(p.DeletionTimestamp.Unix())}
	if g := p.DeletionGracePeriodSeconds; g != nil {
		s.grace, s.hasGrace = *g, true
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		if o, ok := boundedRef(ref.APIVersion, ref.Kind, ref.Name, ref.UID); ok {
			s.owner, s.ownerOK = o, true
		} else {
			s.ownerTooLong = true
		}
	}
	if v, ok := p.Annotations[mutate.AnnotationBudget]; ok && len(v) <= mutate.MaxAnnotationValueLength {
		if b, g, err := budget.ParseAnnotation(v); err == nil && len(b.Annotation(g)) <= v1alpha1.MaxBudgetLength {
			s.budget, s.budgetGrace, s.budgetOK = b, g, true
		}
	}
	s.containers, s.tooMany = treatedContainers(p)
	r.shutdown = s
	return r
}

// boundedRef copies a reference whose fields are within Kubernetes'
// limits; ok is false for one beyond them, which no real object has.
func boundedRef(apiVersion, kind, name string, uid types.UID) (ownerRef, bool) {
	if apiVersion == "" || kind == "" || name == "" || uid == "" ||
		len(apiVersion) > v1alpha1.MaxAPIVersionLength || len(kind) > v1alpha1.MaxKindLength ||
		len(name) > v1alpha1.MaxNameLength || len(uid) > maxUIDLength {
		return ownerRef{}, false
	}
	return ownerRef{APIVersion: strings.Clone(apiVersion), Kind: strings.Clone(kind), Name: strings.Clone(name),
		UID: types.UID(strings.Clone(string(uid)))}, true
}

// treatedContainers lists the containers graceguard budgeted: those named
// in graceguard.io/containers (regular containers or native sidecars),
// else every regular container, with their final states. The webhook
// refused Pods whose annotation does not parse, so a name that matches
// nothing is only skipped here. tooMany reports more than maxContainers,
// or an annotation longer than any the webhook reads; then none is kept.
// The work is linear in the Pod, whatever its annotation names.
func treatedContainers(p *corev1.Pod) (_ []container, tooMany bool) {
	var specs []*corev1.Container
	if v, ok := p.Annotations[mutate.AnnotationContainers]; ok {
		if len(v) > mutate.MaxAnnotationValueLength {
			return nil, true
		}
		byName := make(map[string]*corev1.Container, len(p.Spec.InitContainers)+len(p.Spec.Containers))
		for _, list := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
			for i := range list {
				// Init containers first, as the webhook finds them.
				byName[list[i].Name] = &list[i]
			}
		}
		seen := map[string]bool{}
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if c := byName[name]; c != nil && !seen[name] {
				seen[name] = true
				specs = append(specs, c)
			}
		}
	} else {
		for i := range p.Spec.Containers {
			specs = append(specs, &p.Spec.Containers[i])
		}
	}
	if len(specs) > maxContainers {
		return nil, true
	}
	out := make([]container, 0, len(specs))
	index := make(map[string]int, len(specs))
	for _, c := range specs {
		if len(c.Name) > v1alpha1.MaxContainerNameLength {
			continue // not a DNS label: the API server admits no such container
		}
		k := container{name: strings.Clone(c.Name), hookKnown: true}
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			k.hook, k.hookKnown = hookLength(c.Lifecycle.PreStop)
		}
		index[c.Name] = len(out)
		out = append(out, k)
	}
	// The first status of a name speaks for it, regular containers first.
	seen := make(map[string]bool, len(out))
	for _, list := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range list {
			st := &list[i]
			j, ok := index[st.Name]
			if !ok || seen[st.Name] {
				continue
			}
			seen[st.Name] = true
			if t := st.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
				k := &out[j]
				k.exited, k.finishedAt, k.exitCode = true, clampUnix(t.FinishedAt.Unix()), t.ExitCode
				k.reason, k.oomKilled = strings.Clone(shutdownreport.Cut(t.Reason, v1alpha1.MaxReasonLength)), t.Reason == "OOMKilled"
			}
		}
	}
	return out, false
}

// maxHookBytes bounds the exec command of a preStop hook the transform
// reads (as graceguard's annotations are bounded): a longer one is a
// script whose length the spec cannot tell, and reading a megabyte of it
// at every update of the Pod would only find a lower bound. It is taken
// as of unknown length, so the budget's routing term stands for it.
const maxHookBytes = mutate.MaxAnnotationValueLength

// hookLength is mutate.PreStopLength, the sample code's reading of a hook,
// for hooks of bounded size.
func hookLength(h *corev1.LifecycleHandler) (time.Duration, bool) {
	if h.Exec != nil {
		n := 0
		for _, a := range h.Exec.Command {
			if n += len(a) + 1; n > maxHookBytes {
				return 0, false
			}
		}
	}
	return mutate.PreStopLength(h)
}

// Unix seconds of 1970-01-01 and 9999-12-31T23:59:59Z: the times a sample
// writes. RFC 3339 has four-digit years, and a metav1.Time at year 1 is
// its zero, written as null, which the CRD refuses for a sample's times.
const (
	minUnix = 0
	maxUnix = 253402300799
)

func clampUnix(s int64) int64 { return min(max(s, minUnix), maxUnix) }

func unixTime(s int64) time.Time { return time.Unix(s, 0).UTC() }

// deletion reads the deletion from a terminating Pod's record; ok is false
// when the Pod is not terminating gracefully (no deletionTimestamp, or a
// grace of 0: the final state, or a forced deletion).
func (r *record) deletion() (Deletion, bool) {
	s := r.shutdown
	if s == nil || !s.hasGrace || s.grace <= 0 {
		return Deletion{}, false
	}
	return Deletion{Requested: unixTime(clampUnix(satSub(s.deletedAt, s.grace))), Grace: s.grace}, true
}

// satSub is a - b for b >= 0, saturating instead of wrapping.
func satSub(a, b int64) int64 {
	if a < minUnix || b > a-minUnix {
		return minUnix
	}
	return a - b
}

// event is what the observer keeps of a FailedPreStopHook event: the Pod
// and container it names and when. Events of other kinds of objects, of
// namespaces graceguard does not treat, or naming a container no Pod can
// have, keep their key only.
type event struct {
	objectMeta
	pod       types.UID
	container string
	at        int64
}

// eventTransform returns the event informer's transform.
func eventTransform(ns *namespaces) func(any) (any, error) {
	return func(obj any) (any, error) {
		e, ok := obj.(*corev1.Event)
		if !ok {
			return obj, nil
		}
		return leanEvent(e, ns.treats(e.Namespace)), nil
	}
}

func leanEvent(e *corev1.Event, treated bool) *event {
	r := &event{objectMeta: metaOf(&e.ObjectMeta)}
	io := e.InvolvedObject
	c := containerOf(io.FieldPath)
	if !treated || io.Kind != "Pod" || io.UID == "" || len(io.UID) > maxUIDLength || c == "" || len(c) > v1alpha1.MaxContainerNameLength {
		return r
	}
	at := e.EventTime.Time
	if at.IsZero() {
		at = e.LastTimestamp.Time
	}
	if at.IsZero() {
		at = e.FirstTimestamp.Time
	}
	r.pod, r.container, r.at = types.UID(strings.Clone(string(io.UID))), strings.Clone(c), clampUnix(at.Unix())
	return r
}

// containerOf reads "spec.containers{app}" (or initContainers{...}).
func containerOf(fieldPath string) string {
	i := strings.IndexByte(fieldPath, '{')
	if i < 0 || !strings.HasSuffix(fieldPath, "}") {
		return ""
	}
	return fieldPath[i+1 : len(fieldPath)-1]
}

// maxSliceEndpoints is how many endpoints the API server admits in one
// EndpointSlice (discovery.k8s.io/v1 validation); the transform keeps no
// more of one.
const maxSliceEndpoints = 1000

// maxSliceBytes is the most heap a lean EndpointSlice holds: its key (a
// name of 253 bytes) and 1,000 endpoints of 17 bytes, each allocation
// rounded up to its size class (the tests derive it and measure it).
const maxSliceBytes = 18920

// podKey is a Pod's UID as 16 bytes: the API server makes every UID an
// RFC 4122 UUID, and the slices' endpoints name their Pods by it.
type podKey [16]byte

// keyOf parses a UID; ok is false for anything but a UUID in its 36-byte
// form (an endpoint written by hand may name anything).
func keyOf(uid types.UID) (podKey, bool) {
	if len(uid) != maxUIDLength {
		return podKey{}, false
	}
	u, err := uuid.Parse(string(uid))
	return podKey(u), err == nil
}

// endpointSlice is what the observer keeps of an EndpointSlice: its key
// and, in a namespace graceguard treats, the Pods its endpoints name and
// whether each is routed to. 17 bytes an endpoint, whatever else the
// slice holds (addresses, hostnames, zones, hints, ports: dropped).
type endpointSlice struct {
	objectMeta
	endpoints []endpoint
}

// endpoint is one endpoint of a slice that names a Pod (targetRef).
type endpoint struct {
	pod podKey
	// routed: ready (a nil ready reads true, as KEP-1672 says) and not
	// terminating. A Service with publishNotReadyAddresses keeps its
	// terminating endpoints ready=true by design; their terminating=true
	// is the controller's withdrawal then.
	routed bool
}

// sliceTransform returns the EndpointSlice informer's transform: slices of
// namespaces ns does not treat keep their key only.
func sliceTransform(ns *namespaces) func(any) (any, error) {
	return func(obj any) (any, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			// Already lean (a resync hands the cache's own object back).
			return obj, nil
		}
		return leanSlice(s, ns.treats(s.Namespace)), nil
	}
}

// leanSlice keeps the Pods a slice's endpoints name (at most
// maxSliceEndpoints), each with whether it is routed to.
func leanSlice(s *discoveryv1.EndpointSlice, treated bool) *endpointSlice {
	out := &endpointSlice{objectMeta: metaOf(&s.ObjectMeta)}
	if !treated {
		return out
	}
	n := 0
	for i := range s.Endpoints {
		if isPodRef(s.Endpoints[i].TargetRef) {
			n++
		}
	}
	if n == 0 {
		return out
	}
	out.endpoints = make([]endpoint, 0, min(n, maxSliceEndpoints))
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		if len(out.endpoints) == maxSliceEndpoints {
			break
		}
		if !isPodRef(e.TargetRef) {
			continue
		}
		k, ok := keyOf(e.TargetRef.UID)
		if !ok {
			continue
		}
		c := e.Conditions
		routed := (c.Ready == nil || *c.Ready) && (c.Terminating == nil || !*c.Terminating)
		out.endpoints = append(out.endpoints, endpoint{pod: k, routed: routed})
	}
	return out
}

func isPodRef(r *corev1.ObjectReference) bool {
	return r != nil && r.Kind == "Pod" && (r.APIVersion == "" || r.APIVersion == "v1")
}

// listing is what the observer keeps of a Pod that EndpointSlices of a
// treated namespace list: how many list it and how many of them route to
// it, and when the last of those stopped. Fixed size; the entry goes when
// no slice lists the Pod any more.
type listing struct {
	slices, routed int32
	// stopped is when routed last fell to 0, in Unix seconds of the
	// observer's clock (when it saw the slice's event); 0 when it was not
	// seen routed.
	stopped int64
}

// withdrawal is what the observer keeps of a terminating Pod's
// EndpointSlices, from the moment it sees the Pod terminating until its
// sample is written: fixed size, 16 bytes.
type withdrawal struct {
	// stopped is when the last slice that routed to the Pod stopped
	// (listing.stopped); 0 when none was seen routing to it.
	stopped int64
	// listed: a slice listed the Pod while it terminated.
	listed bool
	// routed: a slice still routes to it, as last seen.
	routed bool
}
