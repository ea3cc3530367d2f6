package observer

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// uid is the n-th test Pod's UID.
func uid(n int) types.UID { return types.UID(fmt.Sprintf("0f6ad2c4-8b0e-4b6e-9d55-%012x", n)) }

// ep is an endpoint of Pod n as the EndpointSlice controller writes it:
// ready and serving while the Pod runs; ready=false, terminating=true once
// it is deleted (KEP-1672).
func ep(n int, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", n)},
		Conditions: discoveryv1.EndpointConditions{Ready: new(ready), Serving: new(true), Terminating: new(!ready)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("web-%d", n), UID: uid(n)}}
}

func lean(name string, eps ...discoveryv1.Endpoint) *endpointSlice {
	return leanSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Endpoints: eps}, true)
}

func TestKeyOfReadsUUIDsOnly(t *testing.T) {
	k, ok := keyOf("0F6AD2C4-8b0e-4b6e-9d55-7b1f0e0c1a2b")
	if k2, ok2 := keyOf("0f6ad2c4-8b0e-4b6e-9d55-7b1f0e0c1a2b"); !ok || !ok2 || k != k2 || k[0] != 0x0f || k[15] != 0x2b {
		t.Errorf("keyOf: %x %v, %x %v", k, ok, k2, ok2)
	}
	for _, bad := range []types.UID{"", "web-1", "0f6ad2c4-8b0e-4b6e-9d55-7b1f0e0c1a2", "0f6ad2c4-8b0e-4b6e-9d55-7b1f0e0c1a2bb",
		"0f6ad2c4x8b0e-4b6e-9d55-7b1f0e0c1a2b", "0g6ad2c4-8b0e-4b6e-9d55-7b1f0e0c1a2b", types.UID(strings.Repeat("u", 1<<20))} {
		if _, ok := keyOf(bad); ok {
			t.Errorf("keyOf(%.40q) reads as a UUID", bad)
		}
	}
}

func TestLeanSliceKeepsThePodsAndWhetherTheyAreRouted(t *testing.T) {
	ready := ep(1, true)
	gone := ep(2, false)
	// publishNotReadyAddresses: ready stays true while the Pod terminates.
	published := ep(3, true)
	published.Conditions.Terminating = new(true)
	unknown := ep(4, true)
	unknown.Conditions = discoveryv1.EndpointConditions{} // nil reads ready, not terminating
	node := ep(5, true)
	node.TargetRef.Kind = "Node"
	noRef := ep(6, true)
	noRef.TargetRef = nil
	notUUID := ep(7, true)
	notUUID.TargetRef.UID = "web-7"
	s := lean("web-abcde", ready, gone, published, unknown, node, noRef, notUUID)
	var got []string
	for _, e := range s.endpoints {
		got = append(got, fmt.Sprintf("%x:%v", e.pod[15], e.routed))
	}
	if want := "1:true 2:false 3:false 4:true"; strings.Join(got, " ") != want {
		t.Errorf("endpoints %v, want %s", got, want)
	}
	if s.name != "web-abcde" || s.namespace != "shop" {
		t.Errorf("key %s/%s", s.namespace, s.name)
	}
	if u := leanSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: "x"}, Endpoints: []discoveryv1.Endpoint{ready}}, false); len(u.endpoints) != 0 {
		t.Error("a slice of a namespace graceguard does not treat keeps its key only")
	}
	ns := newNamespaces(nil)
	ns.optedIn["shop"] = struct{}{}
	tr := sliceTransform(ns)
	obj, _ := tr(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x"}, Endpoints: []discoveryv1.Endpoint{ready}})
	if again, _ := tr(obj); again != obj || len(obj.(*endpointSlice).endpoints) != 1 {
		t.Error("the transform keeps a treated namespace's endpoints, and hands a lean slice back as it is")
	}
}

// hostileSlice is the most a slice can be: 1,000 endpoints (the API
// server's limit), each with 100 addresses, a 253-byte hostname, and a
// target of 253-byte names; and 1,000 more the API server would refuse.
func hostileSlice() *discoveryv1.EndpointSlice {
	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: long('n', 63), Name: long('s', 253), UID: uid(0), ResourceVersion: long('9', 20),
		Labels: map[string]string{discoveryv1.LabelServiceName: long('v', 63)}, Annotations: map[string]string{"junk": long('j', 1<<16)}}}
	for i := range 2 * maxSliceEndpoints {
		e := ep(i, i%2 == 0)
		for j := range 100 {
			e.Addresses = append(e.Addresses, fmt.Sprintf("fd00::%x:%x", i, j))
		}
		e.Hostname = new(long('h', 253))
		e.TargetRef.Name, e.TargetRef.Namespace = long('p', 253), long('n', 63)
		e.Zone, e.NodeName = new(long('z', 63)), new(long('x', 253))
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

// worstSliceBytes derives the most heap a lean slice holds: its key and
// 1,000 endpoints of 17 bytes.
func worstSliceBytes() uintptr {
	return allocPointers(unsafe.Sizeof(endpointSlice{})) + alloc(253) + alloc(maxNamespaceLength) + alloc(maxUIDLength) + alloc(maxResourceVersionLength) +
		alloc(maxSliceEndpoints*unsafe.Sizeof(endpoint{}))
}

func TestTheLeanSliceOfAHostileSliceIsBounded(t *testing.T) {
	if n := unsafe.Sizeof(endpoint{}); n != 17 {
		t.Errorf("an endpoint takes %d bytes, want 17 (a UID as 16 bytes and a flag)", n)
	}
	if n := unsafe.Sizeof(listing{}) + unsafe.Sizeof(podKey{}); n != 32 {
		t.Errorf("a listing's entry takes %d bytes (key and value), want 32", n)
	}
	if n := unsafe.Sizeof(withdrawal{}); n != 16 {
		t.Errorf("a withdrawal takes %d bytes, want 16", n)
	}
	s := hostileSlice()
	l := leanSlice(s, true)
	if len(l.endpoints) != maxSliceEndpoints {
		t.Fatalf("%d endpoints kept, want %d", len(l.endpoints), maxSliceEndpoints)
	}
	per := retained(t, 200, func() any { return leanSlice(s, true) })
	runtime.KeepAlive(s) // else collected during the measurement
	if bound := worstSliceBytes(); bound != maxSliceBytes {
		t.Errorf("a lean slice's worst case is %d bytes, maxSliceBytes says %d: update it and docs/observer.md", bound, maxSliceBytes)
	}
	t.Logf("a hostile slice's lean form retains %d bytes (derived bound %d; %d bytes an endpoint)", per, maxSliceBytes, per/maxSliceEndpoints)
	if per > maxSliceBytes*101/100 || per < maxSliceBytes*95/100 {
		t.Errorf("a hostile slice retains %d bytes, not within 1%% of its derived bound %d", per, maxSliceBytes)
	}
}

// The memory the observer spends per Pod on its slices: a Deployment of
// 100 Pods behind one Service (the controller's 100 endpoints a slice):
// the lean slice and the listing of each Pod.
func TestSlicesCostLittlePerPod(t *testing.T) {
	var eps []discoveryv1.Endpoint
	for i := range 100 {
		eps = append(eps, ep(i, true))
	}
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-abcde", UID: uid(1 << 20), ResourceVersion: "123456789"}, Endpoints: eps}
	per := retained(t, 100, func() any {
		r := newRoutes()
		r.changed(nil, leanSlice(s, true), 1)
		return r
	}) / 100
	runtime.KeepAlive(s)
	t.Logf("per Pod behind one Service: %d bytes (its endpoint, its share of the slice's key, its listing)", per)
	if per > 128 {
		t.Errorf("a Pod behind one Service costs %d bytes of slices, more than 128", per)
	}
}

func TestRoutesTimeTheLastSliceToStopRouting(t *testing.T) {
	requested := at(0).Unix()
	type step struct {
		at             int // seconds after the deletion request
		old, new       *endpointSlice
		terminatingNow bool // the observer sees the Pod terminating at this step
	}
	a1, b1 := lean("a", ep(1, true)), lean("b", ep(1, true))
	a0, b0 := lean("a", ep(1, false)), lean("b", ep(1, false))
	empty := lean("a")
	for _, tc := range []struct {
		name    string
		steps   []step
		want    v1alpha1.Withdrawal
		seconds int64
	}{
		{name: "one Service: marked not ready 3s after the deletion",
			steps: []step{{at: -60, new: a1}, {at: 0, terminatingNow: true}, {at: 3, old: a1, new: a0}},
			want:  v1alpha1.WithdrawalWithdrawn, seconds: 3},
		{name: "two Services: the later slice counts",
			steps: []step{{at: -60, new: a1}, {at: -60, new: b1}, {at: 0, terminatingNow: true}, {at: 2, old: a1, new: a0}, {at: 7, old: b1, new: b0}},
			want:  v1alpha1.WithdrawalWithdrawn, seconds: 7},
		{name: "two Services, one still routing when the sample is written",
			steps: []step{{at: -60, new: a1}, {at: -60, new: b1}, {at: 0, terminatingNow: true}, {at: 2, old: a1, new: a0}},
			want:  v1alpha1.WithdrawalStillReady},
		{name: "dropped from the slice instead (the Pod gone): withdrawn then",
			steps: []step{{at: -60, new: a1}, {at: 0, terminatingNow: true}, {at: 4, old: a1, new: empty}},
			want:  v1alpha1.WithdrawalWithdrawn, seconds: 4},
		{name: "the slice deleted (its Service deleted)",
			steps: []step{{at: -60, new: a1}, {at: 0, terminatingNow: true}, {at: 5, old: a1}},
			want:  v1alpha1.WithdrawalWithdrawn, seconds: 5},
		{name: "the slice's event seen before the Pod's: still timed by the slice",
			steps: []step{{at: -60, new: a1}, {at: 1, old: a1, new: a0}, {at: 2, terminatingNow: true}},
			want:  v1alpha1.WithdrawalWithdrawn, seconds: 1},
		{name: "not ready long before the deletion (readiness failed): withdrawn at 0",
			steps: []step{{at: -60, new: a1}, {at: -30, old: a1, new: a0}, {at: 0, terminatingNow: true}, {at: 2, old: a0, new: empty}},
			want:  v1alpha1.WithdrawalWithdrawn, seconds: 0},
		{name: "no slice lists the Pod",
			steps: []step{{at: -60, new: lean("a", ep(2, true))}, {at: 0, terminatingNow: true}, {at: 3, old: lean("a", ep(2, true)), new: lean("a", ep(2, false))}},
			want:  v1alpha1.WithdrawalNotListed},
		{name: "listed, never seen ready (the observer started after the withdrawal, or the Pod never was)",
			steps: []step{{at: -60, new: a0}, {at: 0, terminatingNow: true}},
			want:  v1alpha1.WithdrawalNeverReady},
		{name: "listed only after the observer saw it terminating, never ready",
			steps: []step{{at: 0, terminatingNow: true}, {at: 1, new: a0}},
			want:  v1alpha1.WithdrawalNeverReady},
		{name: "a resync changes nothing",
			steps: []step{{at: -60, new: a1}, {at: 0, terminatingNow: true}, {at: 3, old: a1, new: a0}, {at: 9, old: a0, new: a0}},
			want:  v1alpha1.WithdrawalWithdrawn, seconds: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRoutes()
			for _, s := range tc.steps {
				if s.terminatingNow {
					r.terminating(uid(1))
					continue
				}
				r.changed(s.old, s.new, requested+int64(s.at))
			}
			w, ok := r.take(uid(1))
			if !ok {
				t.Fatal("no withdrawal kept for a Pod seen terminating")
			}
			got, secs := w.observed(requested)
			if got != tc.want || (secs == nil) != (tc.want != v1alpha1.WithdrawalWithdrawn) || (secs != nil && *secs != tc.seconds) {
				t.Errorf("withdrawal %s %v, want %s %ds", got, deref(secs), tc.want, tc.seconds)
			}
			if _, ok := r.take(uid(1)); ok {
				t.Error("take must forget the withdrawal")
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return "(no figure)"
	}
	return *p
}

func TestRoutesForgetWhatNoSliceLists(t *testing.T) {
	r := newRoutes()
	a := lean("a", ep(1, true), ep(2, true))
	r.changed(nil, a, 1)
	r.changed(a, lean("a", ep(2, false)), 2)
	r.terminating(uid(3)) // a Pod no slice lists
	if len(r.listings) != 1 || len(r.withdrawals) != 1 {
		t.Fatalf("%d listings (want Pod 2's only), %d withdrawals", len(r.listings), len(r.withdrawals))
	}
	r.changed(lean("a", ep(2, false)), nil, 3)
	r.forget(uid(3))
	r.terminating("not-a-uuid")
	if len(r.listings) != 0 || len(r.withdrawals) != 0 {
		t.Errorf("%d listings, %d withdrawals left: want none", len(r.listings), len(r.withdrawals))
	}
}

func TestObserveRecordsTheWithdrawal(t *testing.T) {
	del := Deletion{Requested: t0, Grace: 15}
	p := exited(deletedPod(nil, corev1.Container{Name: "app", Lifecycle: sleepHook(5)}), "app", 0, "Completed", at(12))
	s, skip := observeWithdrawn(p, del, nil, withdrawal{listed: true, stopped: at(3).Unix()})
	if skip != "" || s.Withdrawal != v1alpha1.WithdrawalWithdrawn || s.WithdrawalSeconds == nil || *s.WithdrawalSeconds != 3 || s.DrainSeconds != 7 {
		t.Errorf("sample %+v: want withdrawn after 3s, drain 7s", s)
	}
	s, _ = observeWithdrawn(p, del, nil, withdrawal{})
	if s.Withdrawal != v1alpha1.WithdrawalNotListed || s.WithdrawalSeconds != nil {
		t.Errorf("a Pod no slice listed: %s %v, want NotListed and no figure (not 0)", s.Withdrawal, deref(s.WithdrawalSeconds))
	}
}

// TestAPodCostsTheObserverUnderOneKiB adds up all that the observer keeps
// of an ordinary treated Pod behind one Service (1,000 of them, in slices
// of 100 as the EndpointSlice controller writes them): its record, its
// endpoint in a lean slice and its listing while it runs; its deletion and
// its withdrawal too once it terminates. Issue 42 holds the observer to
// 1 KiB per treated Pod with the withdrawal kept. The informer's own
// index of its cache is not counted (the scale harness measures it).
func TestAPodCostsTheObserverUnderOneKiB(t *testing.T) {
	const n, perSlice = 1000, 100
	ns := newNamespaces(nil)
	ns.optedIn["shop"] = struct{}{}
	rs := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c6b5", UID: "5c1d9a8e-7f0b-4c1e-8a4d-2e9b6f3c7d10", Controller: new(true)}
	var slices []*discoveryv1.EndpointSlice
	for i := 0; i < n; i += perSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%05d", i), UID: uid(1<<20 + i), ResourceVersion: "123456789"}}
		for j := i; j < i+perSlice; j++ {
			s.Endpoints = append(s.Endpoints, ep(j, true))
		}
		slices = append(slices, s)
	}
	for _, terminating := range []bool{false, true} {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			p := fixture.TypicalPod()
			p.Namespace, p.Name, p.UID, p.ResourceVersion = "shop", fmt.Sprintf("web-7d9f8c6b5-%05d", i), uid(i), "123456789"
			p.Labels = map[string]string{mutate.LabelTreated: mutate.LabelTreatedValue, "pod-template-hash": "7d9f8c6b5"}
			p.Annotations[mutate.AnnotationBudget] = budget15
			p.OwnerReferences = []metav1.OwnerReference{rs}
			if terminating {
				// Its last state: every container exited.
				p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: at(30)}, new(int64(30))
				for _, c := range p.Spec.Containers {
					p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
						State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.NewTime(at(12))}}})
				}
			}
			pods[i] = p
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		o := &observer{ns: ns, deletions: map[types.UID]Deletion{}, hooks: map[types.UID][]HookFailure{}, routes: newRoutes()}
		// The owner verified already: podChanged queues no verification.
		o.verdicts.put(owner{Namespace: "shop", ownerRef: ownerRef{APIVersion: rs.APIVersion, Kind: rs.Kind, Name: rs.Name, UID: rs.UID}},
			verdict{final: true})
		cached := make([]any, 0, n+len(slices))
		for _, s := range slices {
			l := leanSlice(s, true)
			o.routes.changed(nil, l, at(0).Unix())
			cached = append(cached, l)
		}
		for _, p := range pods {
			r := leanPod(p, true)
			o.podChanged(r)
			cached = append(cached, r)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(o)
		runtime.KeepAlive(cached)
		runtime.KeepAlive(pods)
		if len(o.routes.listings) != n || (len(o.deletions) == n) != terminating || (len(o.routes.withdrawals) == n) != terminating {
			t.Fatalf("terminating %v: %d listings, %d deletions, %d withdrawals kept for %d Pods", terminating, len(o.routes.listings), len(o.deletions), len(o.routes.withdrawals), n)
		}
		per := int64(after.HeapAlloc-before.HeapAlloc) / n
		t.Logf("terminating %v: %d bytes a Pod (record, endpoint, listing, deletion, withdrawal)", terminating, per)
		if per > 1024 {
			t.Errorf("terminating %v: the observer keeps %d bytes a treated Pod, more than 1 KiB", terminating, per)
		}
	}
}
