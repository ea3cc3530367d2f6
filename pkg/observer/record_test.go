package observer

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// sizeClasses are the Go runtime's small allocation size classes
// (runtime/sizeclasses.go): an allocation of n bytes takes the first class
// of at least n; one of more than 512 bytes holding pointers takes 8 more,
// its type header (runtime.mallocgc, Go 1.22 on).
var sizeClasses = []uintptr{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288,
	320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688,
	3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384,
	18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

func alloc(n uintptr) uintptr {
	if n == 0 {
		return 0
	}
	return class(n)
}

// allocPointers is alloc for memory holding pointers.
func allocPointers(n uintptr) uintptr {
	if n > 512 {
		n += 8
	}
	return class(n)
}

func class(n uintptr) uintptr {
	for _, c := range sizeClasses {
		if c >= n {
			return c
		}
	}
	panic(fmt.Sprintf("no size class for %d", n))
}

// worstRecordBytes derives the most a record can hold: the heap
// allocations of a terminating Pod's record with every kept field at its
// bound (docs/observer.md shows the sum).
func worstRecordBytes() (total uintptr, parts []string) {
	add := func(what string, n uintptr) {
		total += n
		parts = append(parts, fmt.Sprintf("%s %d", what, n))
	}
	add("record", allocPointers(unsafe.Sizeof(record{})))
	add("name", alloc(v1alpha1.MaxNameLength))
	add("namespace", alloc(maxNamespaceLength))
	add("uid", alloc(maxUIDLength))
	add("resourceVersion", alloc(maxResourceVersionLength))
	add("shutdown", allocPointers(unsafe.Sizeof(shutdown{})))
	add("owner apiVersion", alloc(v1alpha1.MaxAPIVersionLength))
	add("owner kind", alloc(v1alpha1.MaxKindLength))
	add("owner name", alloc(v1alpha1.MaxNameLength))
	add("owner uid", alloc(maxUIDLength))
	add("containers", allocPointers(maxContainers*unsafe.Sizeof(container{})))
	add("container names", maxContainers*alloc(v1alpha1.MaxContainerNameLength))
	add("reasons", maxContainers*alloc(v1alpha1.MaxReasonLength))
	return total, parts
}

func TestWorstRecordBytesIsDerived(t *testing.T) {
	got, parts := worstRecordBytes()
	t.Logf("worst-case record: %d bytes = %s", got, strings.Join(parts, " + "))
	if got != maxRecordBytes {
		t.Errorf("the record's worst case is %d bytes (%s), maxRecordBytes says %d: update it and docs/observer.md", got, strings.Join(parts, " + "), maxRecordBytes)
	}
	if running := allocPointers(unsafe.Sizeof(record{})) + alloc(v1alpha1.MaxNameLength) + alloc(maxNamespaceLength) + alloc(maxUIDLength) + alloc(maxResourceVersionLength); running != maxRunningRecordBytes {
		t.Errorf("a running Pod's record is at most %d bytes, maxRunningRecordBytes says %d", running, maxRunningRecordBytes)
	}
}

// hostilePod is the worst a Pod can be for the observer: every field it
// keeps at its bound, and megabytes it must drop (a 1 MiB preStop exec in
// each of 32 treated containers and 1,000 more containers, a 250 KiB
// budget, 1,000 owner references, 1 MiB exit reasons and messages).
func hostilePod() *corev1.Pod {
	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	mib := long('x', 1<<20)
	reason := long('R', 1<<20)
	script := "sleep 5; " + mib
	yes := true
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: long('p', 253), Namespace: long('n', 63), UID: types.UID(long('u', 36)), ResourceVersion: long('9', 20),
		Labels:      map[string]string{mutate.LabelTreated: mutate.LabelTreatedValue, "pod-template-hash": long('h', 63), "junk": long('j', 63)},
		Annotations: map[string]string{mutate.AnnotationBudget: long('b', 250<<10), "other": long('o', 4<<10)},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: long('g', 253) + "/" + long('v', 63), Kind: long('K', 63), Name: long('o', 253), UID: types.UID(long('w', 36)), Controller: &yes,
		}},
		DeletionTimestamp: &metav1.Time{Time: t0.Add(30e9)}, DeletionGracePeriodSeconds: new(int64(30)),
		Finalizers: []string{long('f', 1000)},
	}}
	for i := range 1000 {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("%s-%d", long('c', 240), i), UID: "x"})
	}
	var names []string
	for i := range 1032 {
		name := fmt.Sprintf("%s%02d", long('c', 61), i%100) + fmt.Sprint(i/100)
		name = name[len(name)-63:]
		c := corev1.Container{Name: name, Image: mib, Command: []string{mib},
			Env:       []corev1.EnvVar{{Name: "E", Value: mib}},
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", script}}}}}
		p.Spec.Containers = append(p.Spec.Containers, c)
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: mib, ImageID: mib, ContainerID: mib,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: reason, Message: mib,
				FinishedAt: metav1.NewTime(t0.Add(30e9)), ContainerID: mib}}})
		if i < maxContainers {
			names = append(names, name)
		}
	}
	p.Annotations[mutate.AnnotationContainers] = strings.Join(names, ",")
	return p
}

// retained measures the heap n transformed objects keep alive, per object.
func retained(t *testing.T, n int, transform func() any) uintptr {
	t.Helper()
	keep := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = transform()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return uintptr(after.HeapAlloc-before.HeapAlloc) / uintptr(n)
}

func TestTheRecordOfAHostilePodIsBounded(t *testing.T) {
	ns := newNamespaces(nil)
	p := hostilePod()
	ns.optedIn[p.Namespace] = struct{}{}
	transform := podTransform(ns)
	obj, err := transform(p)
	if err != nil {
		t.Fatal(err)
	}
	r := obj.(*record)
	s := r.shutdown
	if s == nil || len(s.containers) != maxContainers || s.tooMany || !s.ownerOK || s.budgetOK {
		t.Fatalf("record: shutdown %v; want 32 containers, the owner, and no budget (250 KiB does not parse)", s)
	}
	for _, c := range s.containers {
		if len(c.name) != 63 || len(c.reason) != v1alpha1.MaxReasonLength || c.hookKnown || c.exitCode != 137 || !c.exited {
			t.Fatalf("container %.10s...: reason %d bytes, hook known %v; want a 63-byte name, a 32-byte reason, an unknown hook", c.name, len(c.reason), c.hookKnown)
		}
	}
	again, _ := transform(r)
	if again != obj {
		t.Error("the transform of a record (a resync) must hand it back as it is")
	}

	// The derivation is the bound; the measurement (which counts what
	// else the process allocated meanwhile, a few bytes per record) shows
	// it holds and is tight.
	per := retained(t, 2000, func() any { o, _ := transform(p); return o })
	t.Logf("a hostile Pod's record retains %d bytes (derived bound %d)", per, maxRecordBytes)
	if per > maxRecordBytes*101/100 || per < maxRecordBytes*95/100 {
		t.Errorf("a hostile Pod's record retains %d bytes, not within 1%% of its derived bound %d: the derivation is wrong", per, maxRecordBytes)
	}
	// Outside a namespace graceguard treats, the key only.
	delete(ns.optedIn, p.Namespace)
	if per := retained(t, 1000, func() any { o, _ := transform(p); return o }); per > maxRunningRecordBytes {
		t.Errorf("an ignored hostile Pod retains %d bytes, more than a key's %d", per, maxRunningRecordBytes)
	}
}

func TestTheRecordOfAnOrdinaryPodIsSmall(t *testing.T) {
	ns := newNamespaces(nil)
	pod := func(terminating bool) *corev1.Pod {
		p := fixture.TypicalPod()
		p.Namespace, p.Name, p.UID, p.ResourceVersion = "shop", "web-7d9f8c6b5-x2x9q", "0f6ad2c4-8b0e-4b6e-9d55-7b1f0e0c1a2b", "123456789"
		p.Labels = map[string]string{mutate.LabelTreated: mutate.LabelTreatedValue, "pod-template-hash": "7d9f8c6b5"}
		p.Annotations[mutate.AnnotationBudget] = budget15
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c6b5", UID: "5c1d9a8e-7f0b-4c1e-8a4d-2e9b6f3c7d10", Controller: &yes}}
		if terminating {
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: at(30)}, new(int64(30))
			for _, c := range p.Spec.Containers {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.NewTime(at(12))}}})
			}
		}
		return p
	}
	ns.optedIn["shop"] = struct{}{}
	transform := podTransform(ns)
	running, terminating := pod(false), pod(true)
	perRunning := retained(t, 2000, func() any { o, _ := transform(running); return o })
	perTerminating := retained(t, 2000, func() any { o, _ := transform(terminating); return o })
	t.Logf("an ordinary Pod's record retains %d bytes running, %d terminating (%d containers)", perRunning, perTerminating, len(running.Spec.Containers))
	if perRunning > 256 || perTerminating > 1024 {
		t.Errorf("an ordinary Pod's record retains %d bytes running, %d terminating; want at most 256 and 1024", perRunning, perTerminating)
	}
}

func TestTreatedContainers(t *testing.T) {
	app := corev1.Container{Name: "app", Lifecycle: sleepHook(5)}
	many := func(n int) []corev1.Container {
		var cs []corev1.Container
		for i := range n {
			cs = append(cs, corev1.Container{Name: fmt.Sprintf("c%d", i)})
		}
		return cs
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		want    []string
		tooMany bool
	}{
		{name: "every regular container, without the annotation",
			pod: deletedPod(nil, app, corev1.Container{Name: "worker"}), want: []string{"app", "worker"}},
		{name: "the containers the annotation names, a native sidecar among them, each once, in its order",
			pod: func() *corev1.Pod {
				p := deletedPod(map[string]string{mutate.AnnotationContainers: "worker, proxy,app,worker,ghost"}, app, corev1.Container{Name: "worker"})
				p.Spec.InitContainers = []corev1.Container{{Name: "proxy"}}
				return p
			}(), want: []string{"worker", "proxy", "app"}},
		{name: "32 containers: all kept", pod: deletedPod(nil, many(32)...), want: func() []string {
			var n []string
			for i := range 32 {
				n = append(n, fmt.Sprintf("c%d", i))
			}
			return n
		}()},
		{name: "33 containers: none kept, the Pod gives no sample", pod: deletedPod(nil, many(33)...), tooMany: true},
		{name: "an annotation longer than the webhook reads: none kept",
			pod: deletedPod(map[string]string{mutate.AnnotationContainers: strings.Repeat("app,", 1100)}, app), tooMany: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, tooMany := treatedContainers(tc.pod)
			var names []string
			for _, c := range got {
				names = append(names, c.name)
			}
			if tooMany != tc.tooMany || strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("treated %v (too many %v); want %v (%v)", names, tooMany, tc.want, tc.tooMany)
			}
		})
	}
	p := deletedPod(nil, many(33)...)
	if _, skip := observePod(p, Deletion{Requested: t0, Grace: 15}, nil); skip != SkipTooManyContainers {
		t.Errorf("a Pod of 33 containers: skip %q, want %q", skip, SkipTooManyContainers)
	}
}

func TestLeanPodDropsOwnersBeyondKubernetesLimits(t *testing.T) {
	yes := true
	ref := func(apiVersion, kind, name string, uid types.UID) *corev1.Pod {
		p := deletedPod(nil)
		p.DeletionTimestamp = &metav1.Time{Time: t0}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		ok   bool
	}{
		{"a ReplicaSet", ref("apps/v1", "ReplicaSet", "web-7d9f8c6b5", "5c1d9a8e-7f0b-4c1e-8a4d-2e9b6f3c7d10"), true},
		{"names of 253 bytes, a kind of 63, a group of 253", ref(strings.Repeat("g", 253)+"/v1", strings.Repeat("K", 63), strings.Repeat("n", 253), "5c1d9a8e-7f0b-4c1e-8a4d-2e9b6f3c7d10"), true},
		{"a name of 254 bytes", ref("apps/v1", "ReplicaSet", strings.Repeat("n", 254), "u"), false},
		{"a kind of 64 bytes", ref("apps/v1", strings.Repeat("K", 64), "web", "u"), false},
		{"an API version of 318 bytes", ref(strings.Repeat("g", 254)+"/"+strings.Repeat("v", 63), "ReplicaSet", "web", "u"), false},
		{"a UID of 1 MiB", ref("apps/v1", "ReplicaSet", "web", types.UID(strings.Repeat("u", 1<<20))), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := leanPod(tc.pod, true).shutdown
			if s.ownerOK != tc.ok || s.ownerTooLong == tc.ok {
				t.Errorf("owner kept %v, too long %v; want kept %v", s.ownerOK, s.ownerTooLong, tc.ok)
			}
		})
	}
	bare := deletedPod(nil)
	bare.DeletionTimestamp = &metav1.Time{Time: t0}
	if s := leanPod(bare, true).shutdown; s.ownerOK || s.ownerTooLong {
		t.Error("a Pod without a controller has no owner, and none too long")
	}
}

func TestTheBudgetIsKeptAsNumbersAndWrittenBounded(t *testing.T) {
	for _, tc := range []struct {
		name, annotation, want string
	}{
		{"graceguard's own", budget15, budget15},
		{"with a mesh proxy term", "routing=5s work=5s cleanup=2s proxy=4s margin=3s grace=19s", "routing=5s work=5s cleanup=2s proxy=4s margin=3s grace=19s"},
		{"written again from its numbers", "grace=15s margin=3000ms cleanup=2 work=5s routing=5s", budget15},
		{"the longest that parses: 145 bytes",
			"routing=59m59.999999999s work=59m59.999999999s cleanup=59m59.999999999s proxy=59m59.999999999s margin=59m59.999999999s grace=9223372036854775807s",
			"routing=59m59.999999999s work=59m59.999999999s cleanup=59m59.999999999s proxy=59m59.999999999s margin=59m59.999999999s grace=9223372036854775807s"},
		{"one that does not parse: none", "routing=5s work=forever", ""},
		{"250 KiB: not read", budget15 + strings.Repeat(" ", 250<<10), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := exited(deletedPod(map[string]string{mutate.AnnotationBudget: tc.annotation}, corev1.Container{Name: "app"}), "app", 0, "Completed", at(3))
			s, skip := observePod(p, Deletion{Requested: t0, Grace: 15}, nil)
			if skip != "" || s.Budget != tc.want || len(s.Budget) > v1alpha1.MaxBudgetLength {
				t.Errorf("budget %q (%d bytes, skip %q); want %q", s.Budget, len(s.Budget), skip, tc.want)
			}
		})
	}
}
