package webhook

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

func TestValidateWorkloadsDeniesBadTemplatesOfEveryKind(t *testing.T) {
	f := newFixture(t)
	bad := template(map[string]string{mutate.AnnotationMaxWork: "lots"}, "")
	for _, tc := range []struct {
		kind, wantField string
	}{
		{"Deployment", "spec.template.metadata.annotations[graceguard.io/max-work]"},
		{"StatefulSet", "spec.template.metadata.annotations[graceguard.io/max-work]"},
		{"DaemonSet", "spec.template.metadata.annotations[graceguard.io/max-work]"},
		{"ReplicaSet", "spec.template.metadata.annotations[graceguard.io/max-work]"},
		{"Job", "spec.template.metadata.annotations[graceguard.io/max-work]"},
		{"CronJob", "spec.jobTemplate.spec.template.metadata.annotations[graceguard.io/max-work]"},
	} {
		t.Run("a "+tc.kind+" with a bad annotation is denied at "+tc.wantField, func(t *testing.T) {
			resp := f.send(t, PathValidateWorkloads, review{op: admissionv1.Create, group: groupOf(tc.kind), kind: tc.kind, namespace: nsEnforce,
				object: workload(tc.kind, 2, bad)})
			if len(resp.Patch) > 0 {
				t.Errorf("a validating webhook returned a patch: %s", resp.Patch)
			}
			checkInvalid(t, resp, tc.kind, []string{tc.wantField},
				[]string{tc.kind + "." + groupOf(tc.kind) + ` "web" is invalid: ` + tc.wantField + `: Invalid value: "lots"`})
		})
	}
}

func TestValidateWorkloads(t *testing.T) {
	f := newFixture(t)
	good := template(nil, "")
	bad := template(map[string]string{mutate.AnnotationMaxWork: "lots"}, "")
	hookTooLong := template(map[string]string{mutate.AnnotationInject: "false"}, `"lifecycle":{"preStop":{"exec":{"command":["sleep","40"]}}}`)
	deployment := func(op admissionv1.Operation, ns string, replicas int, tpl string) review {
		return review{op: op, group: "apps", kind: "Deployment", namespace: ns, object: workload("Deployment", replicas, tpl)}
	}
	update := func(oldReplicas int, oldTpl string, replicas int, tpl string) review {
		r := deployment(admissionv1.Update, nsEnforce, replicas, tpl)
		r.oldObject = workload("Deployment", oldReplicas, oldTpl)
		return r
	}
	for _, tc := range []struct {
		name        string
		review      review
		wantDenied  []string // cause fields; nil means allowed
		wantMessage []string
		warnings    []string // beginnings
	}{
		{
			name:   "a good Deployment is allowed, with no patch",
			review: deployment(admissionv1.Create, nsEnforce, 2, good),
		},
		{
			name: "a Deployment whose budget needs more grace is allowed: its Pods will get it from the mutating webhook",
			review: deployment(admissionv1.Create, nsEnforce, 2,
				template(map[string]string{mutate.AnnotationMaxWork: "60s"}, "")),
		},
		{
			name:       "an opted-out template whose preStop outlasts its grace is denied with the numbers",
			review:     deployment(admissionv1.Create, nsEnforce, 2, hookTooLong),
			wantDenied: []string{"spec.template.spec.containers[0].lifecycle.preStop"},
			wantMessage: []string{
				`Deployment.apps "web" is invalid: spec.template.spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 40": must be shorter than terminationGracePeriodSeconds (30s)`,
			},
		},
		{
			name: "a CronJob's template is checked at spec.jobTemplate.spec.template",
			review: review{op: admissionv1.Create, group: "batch", kind: "CronJob", namespace: nsEnforce,
				object: workload("CronJob", 1, hookTooLong)},
			wantDenied: []string{"spec.jobTemplate.spec.template.spec.containers[0].lifecycle.preStop"},
		},
		{
			name:   "an UPDATE that only scales is allowed even though the template would now be denied",
			review: update(2, bad, 5, bad),
		},
		{
			name:       "an UPDATE that changes the template is checked",
			review:     update(2, good, 2, bad),
			wantDenied: []string{"spec.template.metadata.annotations[graceguard.io/max-work]"},
		},
		{
			name:   "an UPDATE that fixes the template is allowed",
			review: update(2, bad, 2, good),
		},
		{
			name:   "a DELETE passes through",
			review: review{op: admissionv1.Delete, group: "apps", kind: "Deployment", namespace: nsEnforce, oldObject: workload("Deployment", 2, bad)},
		},
		{
			name:   "a Deployment in a namespace that did not opt in is not checked",
			review: deployment(admissionv1.Create, nsPlain, 2, bad),
		},
		{
			name:   "a Deployment in kube-system is not checked",
			review: deployment(admissionv1.Create, nsSystem, 2, bad),
		},
		{
			name:   "a Deployment in graceguard's own namespace is not checked",
			review: deployment(admissionv1.Create, nsOwn, 2, bad),
		},
		{
			name:     "in a warn-mode namespace a bad template is allowed with a warning",
			review:   deployment(admissionv1.Create, nsWarn, 2, bad),
			warnings: []string{`enforce would deny: spec.template.metadata.annotations[graceguard.io/max-work]: Invalid value: "lots"`},
		},
		{
			name:   "a Deployment whose namespace cannot be read is allowed (and logged)",
			review: deployment(admissionv1.Create, nsBroken, 2, bad),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.send(t, PathValidateWorkloads, tc.review)
			if len(resp.Patch) > 0 || resp.PatchType != nil {
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
			checkInvalid(t, resp, tc.review.kind, tc.wantDenied, tc.wantMessage)
		})
	}
}
