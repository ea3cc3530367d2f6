package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The patch for a basic Pod in an opted-in namespace with the cluster
// defaults (routing 5s, work 20s, cleanup 2s, margin 3s = 30s): a preStop
// sleep of the routing delay and the budget annotation; the grace of 30
// already covers the budget and is left alone.
const basicPatch = `[
	{"op":"add","path":"/spec/containers/0/lifecycle","value":{"preStop":{"sleep":{"seconds":5}}}},
	{"op":"add","path":"/metadata/annotations","value":{"graceguard.io/budget":"routing=5s work=20s cleanup=2s margin=3s grace=30s"}},
	{"op":"add","path":"/metadata/labels","value":{"graceguard.io/treated":"true"}}
]`

func TestMutatePod(t *testing.T) {
	f := newFixture(t)
	create := func(ns, obj string) review {
		return review{op: admissionv1.Create, kind: "Pod", namespace: ns, object: obj}
	}
	for _, tc := range []struct {
		name      string
		review    review
		wantPatch string // exact JSON patch; "" for none
		warnings  []string
		// warningHas: each must be a substring of some warning (when the
		// exact list is not the point).
		warningHas []string
	}{
		{
			name:      "a basic Pod gets a preStop sleep of 5s and the budget annotation, grace stays 30",
			review:    create(nsEnforce, pod("web", 30, nil, "")),
			wantPatch: basicPatch,
		},
		{
			name:   "a Pod whose budget needs more grace gets it raised, with the arithmetic in the annotation",
			review: create(nsEnforce, pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "60s"}, "")),
			wantPatch: `[
				{"op":"add","path":"/spec/containers/0/lifecycle","value":{"preStop":{"sleep":{"seconds":5}}}},
				{"op":"add","path":"/spec/terminationGracePeriodSeconds","value":70},
				{"op":"add","path":"/metadata/annotations/graceguard.io~1budget","value":"routing=5s work=1m cleanup=2s margin=3s grace=70s"},
				{"op":"add","path":"/metadata/labels","value":{"graceguard.io/treated":"true"}}
			]`,
		},
		{
			name:      "a serving container without a readiness probe is patched and warned about",
			review:    create(nsEnforce, pod("web", 30, nil, `"ports":[{"containerPort":8080}]`)),
			wantPatch: basicPatch,
			warnings:  []string{"spec.containers[0].readinessProbe: serving container has none; set graceguard.io/readiness-path"},
		},
		{
			name: "a Windows Pod asking for exec gets the sleep action (Windows images have no sleep), and a warning",
			review: create(nsEnforce, strings.Replace(pod("iis", 30, map[string]string{mutate.AnnotationPreStop: "exec"}, ""),
				`"spec":{`, `"spec":{"os":{"name":"windows"},`, 1)),
			wantPatch: `[
				{"op":"add","path":"/spec/containers/0/lifecycle","value":{"preStop":{"sleep":{"seconds":5}}}},
				{"op":"add","path":"/metadata/annotations/graceguard.io~1budget","value":"routing=5s work=20s cleanup=2s margin=3s grace=30s"},
				{"op":"add","path":"/metadata/labels","value":{"graceguard.io/treated":"true"}}
			]`,
			warnings: []string{"metadata.annotations[graceguard.io/prestop]: Windows: sleep action, not exec (no sleep binary)"},
		},
		{
			name: "a Pod on Windows nodes only by its node selector is a Windows Pod too",
			review: create(nsEnforce, strings.Replace(pod("iis", 30, map[string]string{mutate.AnnotationPreStop: "exec"}, ""),
				`"spec":{`, `"spec":{"nodeSelector":{"kubernetes.io/os":"windows","pool":"iis"},`, 1)),
			wantPatch: `[
				{"op":"add","path":"/spec/containers/0/lifecycle","value":{"preStop":{"sleep":{"seconds":5}}}},
				{"op":"add","path":"/metadata/annotations/graceguard.io~1budget","value":"routing=5s work=20s cleanup=2s margin=3s grace=30s"},
				{"op":"add","path":"/metadata/labels","value":{"graceguard.io/treated":"true"}}
			]`,
			warnings: []string{"metadata.annotations[graceguard.io/prestop]: Windows: sleep action, not exec (no sleep binary)"},
		},
		{
			name:     "a Pod in a warn-mode namespace gets warnings saying what enforce would set, and no patch",
			review:   create(nsWarn, pod("web", 30, nil, "")),
			warnings: []string{"enforce would set spec.containers[0].lifecycle.preStop: sleep 5s"},
		},
		{
			name:   "a Pod in a namespace that did not opt in is untouched",
			review: create(nsPlain, pod("web", 30, nil, "")),
		},
		{
			name:   "a Pod in kube-system is untouched, whatever the namespace's labels",
			review: create(nsSystem, pod("web", 30, nil, "")),
		},
		{
			name:   "a Pod in graceguard's own namespace is untouched",
			review: create(nsOwn, pod("web", 30, nil, "")),
		},
		{
			name:      "exclusion is by exact name: kube-system-2 is treated",
			review:    create(nsLabelled, pod("web", 30, nil, "")),
			wantPatch: basicPatch,
		},
		{
			name:   "a mirror Pod is untouched",
			review: create(nsEnforce, pod("kube-apiserver-node1", 30, map[string]string{"kubernetes.io/config.mirror": "abc"}, "")),
		},
		{
			name:   "a Pod that opted out is untouched",
			review: create(nsEnforce, pod("web", 30, map[string]string{mutate.AnnotationInject: "false"}, "")),
		},
		{
			name:     "a Pod whose namespace cannot be read is admitted unchanged, with a warning",
			review:   create(nsBroken, pod("web", 30, nil, "")),
			warnings: []string{NamespaceUnavailableWarning},
		},
		{
			name:   "an UPDATE passes through unpatched: lifecycle, probes and grace are immutable",
			review: review{op: admissionv1.Update, kind: "Pod", namespace: nsEnforce, object: pod("web", 30, nil, ""), oldObject: pod("web", 30, nil, "")},
		},
		{
			name:   "a DELETE passes through",
			review: review{op: admissionv1.Delete, kind: "Pod", namespace: nsEnforce, oldObject: pod("web", 30, nil, "")},
		},
		{
			name:   "a CONNECT passes through",
			review: review{op: admissionv1.Connect, kind: "Pod", namespace: nsEnforce, object: `{"apiVersion":"v1","kind":"PodExecOptions","command":["sh"]}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.send(t, PathMutatePod, tc.review)
			if !resp.Allowed {
				t.Fatalf("not allowed: %+v", resp.Result)
			}
			if resp.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" {
				t.Errorf("uid %q not echoed", resp.UID)
			}
			switch {
			case tc.wantPatch == "" && len(resp.Patch) > 0:
				t.Errorf("unexpected patch %s", resp.Patch)
			case tc.wantPatch != "" && !jsonEqual(t, resp.Patch, tc.wantPatch):
				t.Errorf("patch\n got %s\nwant %s", resp.Patch, tc.wantPatch)
			}
			if tc.warnings != nil && !reflect.DeepEqual(resp.Warnings, tc.warnings) {
				t.Errorf("warnings\n got %q\nwant %q", resp.Warnings, tc.warnings)
			}
			if tc.warnings == nil && len(resp.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", resp.Warnings)
			}
			for _, w := range resp.Warnings {
				if len(w) > mutate.MaxWarningLength {
					t.Errorf("warning longer than %d: %q", mutate.MaxWarningLength, w)
				}
			}
		})
	}
	if f.ns.wasAsked(nsSystem) || f.ns.wasAsked(nsOwn) {
		t.Errorf("excluded namespaces were read (%v); they must be skipped by name", f.ns.asked)
	}
}

// Fields the Go types do not know (from a newer API server, or alpha
// gates) must survive mutation: the patch only adds, so applying it to the
// raw object keeps them.
// The mutating webhook refuses what the validating webhook would refuse of
// the Pod it leaves, with the very same answer (and the advice it would
// have given with its changes): then every Pod it admits carries its record
// of the budget it applied, and the API server may skip the validating call
// for a Pod whose final shape still agrees with it (docs/admission.md). In
// warn mode it refuses nothing.
func TestMutatePodRefusesWhatValidationWould(t *testing.T) {
	f := newFixture(t)
	sidecar := func(hook string) string {
		return `{"name":"proxy","image":"x","restartPolicy":"Always","lifecycle":{"preStop":` + hook + `}}`
	}
	withSidecar := func(ann map[string]string, hook string) string {
		meta, _ := json.Marshal(map[string]any{"name": "web", "annotations": ann})
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":%s,"spec":{"terminationGracePeriodSeconds":30,"initContainers":[%s],"containers":[{"name":"app","image":"x","ports":[{"containerPort":8080}],"lifecycle":{"preStop":{"sleep":{"seconds":5}}}}]}}`,
			meta, sidecar(hook))
	}
	for _, tc := range []struct {
		name   string
		obj    string
		fields []string
	}{
		{"an unparseable annotation", pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "lots"}, ""), []string{"metadata.annotations[graceguard.io/max-work]"}},
		{"a budget over the cap", pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "1h"}, ""), []string{"spec.terminationGracePeriodSeconds"}},
		{"a container list naming no container", pod("web", 30, map[string]string{mutate.AnnotationContainers: "ghost"}, ""), []string{"metadata.annotations[graceguard.io/containers]"}},
		{"an untreated native sidecar whose hook outlasts the grace graceguard sets",
			withSidecar(nil, `{"sleep":{"seconds":30}}`), []string{"spec.initContainers[0].lifecycle.preStop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: tc.obj}
			m := f.send(t, PathMutatePod, r)
			checkInvalid(t, m, "Pod", tc.fields, nil)
			if len(m.Patch) > 0 {
				t.Errorf("a refusal with a patch: %s", m.Patch)
			}
			// What the validating webhook says of the Pod as graceguard
			// would have left it (each of these Pods has every hook
			// graceguard would add already).
			v := f.send(t, PathValidatePod, r)
			if !reflect.DeepEqual(m.Result, v.Result) {
				t.Errorf("mutating refusal\n%+v\nvalidating refusal\n%+v", m.Result, v.Result)
			}
		})
	}
	t.Run("the advice comes with the refusal", func(t *testing.T) {
		m := f.send(t, PathMutatePod, review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: withSidecar(nil, `{"sleep":{"seconds":30}}`)})
		if !prefixes(m.Warnings, []string{"spec.containers[0].readinessProbe: serving container has none"}) {
			t.Errorf("warnings %q", m.Warnings)
		}
	})
	t.Run("warn mode refuses nothing", func(t *testing.T) {
		m := f.send(t, PathMutatePod, review{op: admissionv1.Create, kind: "Pod", namespace: nsWarn, object: pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "lots"}, "")})
		if !m.Allowed || len(m.Patch) > 0 {
			t.Fatalf("allowed %t, patch %s", m.Allowed, m.Patch)
		}
	})
}

func TestMutatePodKeepsUnknownFields(t *testing.T) {
	f := newFixture(t)
	raw := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","annotations":{"team":"shop"}},
		"spec":{"terminationGracePeriodSeconds":30,
			"someFutureField":{"enabled":true,"nested":{"n":1}},
			"containers":[{"name":"app","image":"app:1","someFutureContainerField":"keep me",
				"lifecycle":{"postStart":{"exec":{"command":["true"]}},"futureHook":{"x":1}}}]}}`
	resp := f.send(t, PathMutatePod, review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: raw})
	for _, op := range ops(t, resp) {
		if op["op"] != "add" {
			t.Errorf("patch has a %q operation: %v", op["op"], op)
		}
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := patch.Apply([]byte(raw))
	if err != nil {
		t.Fatalf("applying the patch to the raw object: %v", err)
	}
	var got struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			SomeFutureField map[string]any `json:"someFutureField"`
			Containers      []struct {
				SomeFutureContainerField string `json:"someFutureContainerField"`
				Lifecycle                struct {
					PreStop    map[string]any `json:"preStop"`
					PostStart  map[string]any `json:"postStart"`
					FutureHook map[string]any `json:"futureHook"`
				} `json:"lifecycle"`
			} `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patched, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Spec.Containers[0]
	for what, ok := range map[string]bool{
		"spec.someFutureField":                        reflect.DeepEqual(got.Spec.SomeFutureField, map[string]any{"enabled": true, "nested": map[string]any{"n": float64(1)}}),
		"spec.containers[0].someFutureContainerField": c.SomeFutureContainerField == "keep me",
		"spec.containers[0].lifecycle.futureHook":     c.Lifecycle.FutureHook != nil,
		"spec.containers[0].lifecycle.postStart":      c.Lifecycle.PostStart != nil,
		"metadata.annotations[team]":                  got.Metadata.Annotations["team"] == "shop",
		"the added preStop":                           c.Lifecycle.PreStop != nil,
		"the added budget annotation":                 got.Metadata.Annotations[mutate.AnnotationBudget] != "",
	} {
		if !ok {
			t.Errorf("%s missing after the patch:\n%s", what, patched)
		}
	}
}

// A dry run (kubectl apply --dry-run=server) gets the very same answer.
func TestDryRunIsAnsweredTheSame(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, path string
		r          review
	}{
		{"a mutated Pod", PathMutatePod, review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: pod("web", 30, nil, "")}},
		{"a warned Pod", PathMutatePod, review{op: admissionv1.Create, kind: "Pod", namespace: nsWarn, object: pod("web", 30, nil, "")}},
		{"a denied Pod", PathValidatePod, review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "60s"}, "")}},
		{"a denied Deployment", PathValidateWorkloads, review{op: admissionv1.Create, group: "apps", kind: "Deployment", namespace: nsEnforce,
			object: workload("Deployment", 2, template(map[string]string{mutate.AnnotationMaxWork: "lots"}, ""))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wet := f.send(t, tc.path, tc.r)
			tc.r.dryRun = true
			dry := f.send(t, tc.path, tc.r)
			if !reflect.DeepEqual(wet, dry) {
				t.Errorf("dry run answered differently:\n wet %+v\n dry %+v", wet, dry)
			}
		})
	}
}

// istio#34799: a Pod with 1500 env vars took 15s to patch. The patch here
// is built from the decision, not a diff of the whole object.
func TestMutatePodWith1500EnvVars(t *testing.T) {
	f := newFixture(t)
	env := make([]string, 1500)
	for i := range env {
		env[i] = fmt.Sprintf(`{"name":"VAR_%d","value":"value-%d"}`, i, i)
	}
	obj := pod("big", 30, nil, `"env":[`+strings.Join(env, ",")+`]`)
	start := time.Now()
	resp := f.send(t, PathMutatePod, review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: obj})
	took := time.Since(start)
	if !jsonEqual(t, resp.Patch, basicPatch) {
		t.Errorf("patch\n got %s\nwant %s", resp.Patch, basicPatch)
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := patch.Apply([]byte(obj))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Spec struct {
			Containers []struct {
				Env []map[string]string `json:"env"`
			} `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patched, &p); err != nil {
		t.Fatal(err)
	}
	if n := len(p.Spec.Containers[0].Env); n != 1500 || p.Spec.Containers[0].Env[1499]["name"] != "VAR_1499" {
		t.Errorf("env vars after the patch: %d", n)
	}
	// Generous for a loaded CI machine under -race; the point is seconds, not 15 of them.
	if took > 3*time.Second {
		t.Errorf("review took %s", took)
	}
}

func TestValidatePod(t *testing.T) {
	f := newFixture(t)
	create := func(ns, obj string) review {
		return review{op: admissionv1.Create, kind: "Pod", namespace: ns, object: obj}
	}
	sleep40 := `"lifecycle":{"preStop":{"exec":{"command":["sleep","40"]}}}`
	for _, tc := range []struct {
		name   string
		review review
		// wantDenied lists the field paths of the causes, in order; nil
		// means allowed.
		wantDenied []string
		// wantMessage are substrings of the status message.
		wantMessage []string
		// warnings are the expected warnings' beginnings.
		warnings []string
	}{
		{
			name:       "an opted-out Pod whose exec sleep 40 outlasts its grace of 30 is denied with the field and the numbers",
			review:     create(nsEnforce, pod("web", 30, map[string]string{mutate.AnnotationInject: "false"}, sleep40)),
			wantDenied: []string{"spec.containers[0].lifecycle.preStop"},
			wantMessage: []string{
				`Pod "web" is invalid: spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 40": must be shorter than terminationGracePeriodSeconds (30s)`,
				"killed at 30s (exit 137)",
			},
		},
		{
			name:       "a Pod whose budget exceeds its grace is denied with the arithmetic",
			review:     create(nsEnforce, pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "60s"}, `"lifecycle":{"preStop":{"sleep":{"seconds":5}}}`)),
			wantDenied: []string{"spec.terminationGracePeriodSeconds"},
			wantMessage: []string{
				"spec.terminationGracePeriodSeconds: Invalid value: 30: must be at least 70 (routing 5s + work 1m + cleanup 2s + margin 3s); raise it or lower graceguard.io/max-work",
			},
		},
		{
			name:       "a Pod with an unparseable annotation is denied at the annotation",
			review:     create(nsEnforce, pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "lots"}, "")),
			wantDenied: []string{"metadata.annotations[graceguard.io/max-work]"},
		},
		{
			name:       "a Pod the mutating webhook did not treat (an outage under Ignore) is denied, so its controller retries",
			review:     create(nsEnforce, pod("web", 30, nil, "")),
			wantDenied: []string{"spec.containers[0].lifecycle.preStop"},
			wantMessage: []string{
				"spec.containers[0].lifecycle.preStop: Required value: graceguard's mutating webhook adds a 5s preStop sleep here and did not run for this Pod",
			},
		},
		{
			name:   "a Pod as the mutating webhook left it is allowed",
			review: create(nsEnforce, pod("web", 30, nil, `"lifecycle":{"preStop":{"sleep":{"seconds":5}}}`)),
		},
		{
			name:     "in a warn-mode namespace the same violation is a warning, not a denial",
			review:   create(nsWarn, pod("web", 30, map[string]string{mutate.AnnotationInject: "false"}, sleep40)),
			warnings: []string{`enforce would deny: spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 40": must be shorter than terminationGracePeriodSeconds (30s)`},
		},
		{
			name:   "a Pod in a namespace that did not opt in is not checked",
			review: create(nsPlain, pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "60s"}, sleep40)),
		},
		{
			name:   "a Pod in kube-system is not checked",
			review: create(nsSystem, pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "60s"}, sleep40)),
		},
		{
			name:   "a mirror Pod is not checked",
			review: create(nsEnforce, pod("web", 30, map[string]string{"kubernetes.io/config.mirror": "abc"}, sleep40)),
		},
		{
			name:   "a Pod whose namespace cannot be read is allowed (and logged)",
			review: create(nsBroken, pod("web", 30, map[string]string{mutate.AnnotationMaxWork: "60s"}, "")),
		},
		{
			name:   "an UPDATE is not checked",
			review: review{op: admissionv1.Update, kind: "Pod", namespace: nsEnforce, object: pod("web", 30, nil, sleep40), oldObject: pod("web", 30, nil, sleep40)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.send(t, PathValidatePod, tc.review)
			if len(resp.Patch) > 0 {
				t.Errorf("a validating webhook returned a patch: %s", resp.Patch)
			}
			if !prefixes(resp.Warnings, tc.warnings) {
				t.Errorf("warnings\n got %q\nwant %q...", resp.Warnings, tc.warnings)
			}
			if tc.wantDenied == nil {
				if !resp.Allowed {
					t.Fatalf("denied: %+v", resp.Result)
				}
				return
			}
			checkInvalid(t, resp, "Pod", tc.wantDenied, tc.wantMessage)
		})
	}
}

// checkInvalid asserts a denial that carries the whole 422 Invalid status,
// as the API server's own validation would: reason, code, kind, and one
// cause per field.
func checkInvalid(t *testing.T, resp *admissionv1.AdmissionResponse, kind string, fields, messages []string) {
	t.Helper()
	if resp.Allowed {
		t.Fatal("allowed, want denied")
	}
	st := resp.Result
	if st == nil || st.Code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid || st.Status != metav1.StatusFailure {
		t.Fatalf("status %+v, want a 422 Invalid failure", st)
	}
	if st.Details == nil || st.Details.Kind != kind {
		t.Fatalf("status details %+v, want kind %s", st.Details, kind)
	}
	var got []string
	for _, c := range st.Details.Causes {
		got = append(got, c.Field)
		if c.Type != metav1.CauseTypeFieldValueInvalid && c.Type != metav1.CauseTypeFieldValueNotSupported && c.Type != metav1.CauseTypeFieldValueRequired {
			t.Errorf("cause type %q", c.Type)
		}
	}
	if !reflect.DeepEqual(got, fields) {
		t.Errorf("cause fields %q, want %q", got, fields)
	}
	for _, m := range messages {
		if !strings.Contains(st.Message, m) {
			t.Errorf("message %q\nlacks %q", st.Message, m)
		}
	}
}

// prefixes reports whether each warning starts with its expected
// beginning, and stays within what the API server keeps (256).
func prefixes(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) || len(got[i]) > mutate.MaxDenialWarningLength {
			return false
		}
	}
	return true
}
