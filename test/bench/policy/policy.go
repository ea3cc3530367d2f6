// Package policy holds the native MutatingAdmissionPolicies that graceguard
// is measured beside (the YAML files of this directory): `make bench` runs
// each as an arm of its own, and `make scale` runs the two-mutation one in
// its creation bursts. Each file holds one policy and its binding.
package policy

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

var (
	// TwoMutations is graceguard's injection of the Pods measured (preStop
	// sleep, grace, the budget record, and a readiness probe from
	// graceguard.io/readiness-path) in CEL: graceguard-in-cel.yaml.
	//go:embed graceguard-in-cel.yaml
	TwoMutations []byte
	// OneMutation is its first mutation alone, for Pods without
	// graceguard.io/readiness-path: graceguard-in-cel-one-mutation.yaml.
	//go:embed graceguard-in-cel-one-mutation.yaml
	OneMutation []byte
)

// Parse reads a policy file: one MutatingAdmissionPolicy and one binding.
func Parse(file []byte) (*admissionregv1.MutatingAdmissionPolicy, *admissionregv1.MutatingAdmissionPolicyBinding, error) {
	var (
		p *admissionregv1.MutatingAdmissionPolicy
		b *admissionregv1.MutatingAdmissionPolicyBinding
	)
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(file)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.Kind {
		case "MutatingAdmissionPolicy":
			p = &admissionregv1.MutatingAdmissionPolicy{}
			if err := yaml.UnmarshalStrict(doc, p); err != nil {
				return nil, nil, err
			}
		case "MutatingAdmissionPolicyBinding":
			b = &admissionregv1.MutatingAdmissionPolicyBinding{}
			if err := yaml.UnmarshalStrict(doc, b); err != nil {
				return nil, nil, err
			}
		case "":
		default:
			return nil, nil, fmt.Errorf("test/bench/policy: unexpected kind %q; accepted: MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding", meta.Kind)
		}
	}
	if p == nil || b == nil {
		return nil, nil, fmt.Errorf("test/bench/policy: a file needs a MutatingAdmissionPolicy and a MutatingAdmissionPolicyBinding (policy found: %t, binding found: %t)", p != nil, b != nil)
	}
	return p, b, nil
}

// Install creates a file's policy and its binding; edit, when not nil,
// changes the binding first (scale binds it to its own namespace).
func Install(ctx context.Context, kube kubernetes.Interface, file []byte, edit func(*admissionregv1.MutatingAdmissionPolicyBinding)) error {
	p, b, err := Parse(file)
	if err != nil {
		return err
	}
	if edit != nil {
		edit(b)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the MutatingAdmissionPolicy %s (admissionregistration.k8s.io/v1, GA in 1.36): %w", p.Name, err)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the MutatingAdmissionPolicyBinding %s: %w", b.Name, err)
	}
	return nil
}
