// Package manifest runs graceguard's decisions offline, on the YAML or JSON
// documents people keep in git: the kubectl plugin and the golden tests
// both use it, so they see exactly what the webhook would do.
//
// Invariant: the output object is the input document with the webhook's
// JSON patch applied, so fields this module's Go types do not know survive.
package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// Document is one object read from a stream.
type Document struct {
	// Source says where it came from: "FILE#N" (N counts documents from 1).
	Source     string
	Raw        []byte // the object as JSON
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name         string `json:"name"`
		GenerateName string `json:"generateName"`
		Namespace    string `json:"namespace"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

// Read splits a stream of YAML documents (or JSON objects) into objects,
// flattening Lists. Empty documents are skipped. An error names the source
// and the document number.
func Read(r io.Reader, source string) ([]Document, error) {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs []Document
	for n := 1; ; n++ {
		chunk, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		src := fmt.Sprintf("%s#%d", source, n)
		if err != nil {
			return nil, fmt.Errorf("%s: reading YAML: %w", src, err)
		}
		if len(bytes.TrimSpace(stripComments(chunk))) == 0 {
			continue
		}
		raw, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return nil, fmt.Errorf("%s: not valid YAML or JSON: %w", src, err)
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		got, err := split(raw, src)
		if err != nil {
			return nil, err
		}
		docs = append(docs, got...)
	}
}

func split(raw []byte, src string) ([]Document, error) {
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("%s: not a Kubernetes object (want a mapping with apiVersion and kind): %w", src, err)
	}
	if h.Kind == "" || h.APIVersion == "" {
		return nil, fmt.Errorf("%s: not a Kubernetes object: apiVersion and kind are required", src)
	}
	if strings.HasSuffix(h.Kind, "List") && h.Items != nil {
		var out []Document
		for i, item := range h.Items {
			got, err := split(item, fmt.Sprintf("%s.items[%d]", src, i))
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
		return out, nil
	}
	name := h.Metadata.Name
	if name == "" && h.Metadata.GenerateName != "" {
		name = h.Metadata.GenerateName
	}
	return []Document{{Source: src, Raw: raw, APIVersion: h.APIVersion, Kind: h.Kind, Namespace: h.Metadata.Namespace, Name: name}}, nil
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// Supported reports whether graceguard acts on documents of this kind.
func (d Document) Supported() bool {
	if d.Kind == "Pod" && d.APIVersion == "v1" {
		return true
	}
	_, err := mutate.NewWorkload(d.Kind)
	return err == nil && (strings.HasPrefix(d.APIVersion, "apps/") || strings.HasPrefix(d.APIVersion, "batch/"))
}

// Result is what the webhooks would do with one document.
type Result struct {
	Doc Document
	// Object is the document as the mutating webhook would leave it (for
	// workloads: with its template as the Pods would be), as JSON.
	Object []byte
	// Mutation and Validation are the two webhooks' reports.
	Mutation, Validation *mutate.Report
}

// Process runs both webhooks' decisions on a Pod or workload document.
func Process(d Document, ns mutate.Namespace, opts mutate.Options) (Result, error) {
	res := Result{Doc: d, Object: d.Raw}
	target, err := decode(d)
	if err != nil {
		return res, err
	}
	// Mutate the template too: people want to see the Pods it makes. The
	// webhook itself never patches templates.
	res.Mutation = mutate.Mutate(target, ns, opts)
	if ops := res.Mutation.Patch(); len(ops) > 0 {
		if res.Object, err = ApplyPatch(d.Raw, ops); err != nil {
			return res, fmt.Errorf("%s: applying graceguard's patch: %w", d.Source, err)
		}
	}
	// Validate what the API server would hand the validating webhook: the
	// mutated Pod, or the workload as submitted.
	vdoc := d
	if d.Kind == "Pod" {
		vdoc.Raw = res.Object
	}
	vt, err := decode(vdoc)
	if err != nil {
		return res, err
	}
	res.Validation = mutate.Validate(vt, ns, opts)
	return res, nil
}

func decode(d Document) (mutate.Target, error) {
	if d.Kind == "Pod" {
		var pod corev1.Pod
		if err := json.Unmarshal(d.Raw, &pod); err != nil {
			return mutate.Target{}, fmt.Errorf("%s: decoding Pod %s: %w", d.Source, d.Name, err)
		}
		return mutate.ForPod(&pod), nil
	}
	obj, err := mutate.NewWorkload(d.Kind)
	if err != nil {
		return mutate.Target{}, fmt.Errorf("%s: %w", d.Source, err)
	}
	if err := json.Unmarshal(d.Raw, obj); err != nil {
		return mutate.Target{}, fmt.Errorf("%s: decoding %s %s: %w", d.Source, d.Kind, d.Name, err)
	}
	return mutate.ForWorkload(obj)
}

// ApplyPatch applies JSON patch operations to a JSON document, as the API
// server does with a webhook's patch.
func ApplyPatch(doc []byte, ops []mutate.Operation) ([]byte, error) {
	pb, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	p, err := jsonpatch.DecodePatch(pb)
	if err != nil {
		return nil, err
	}
	return p.Apply(doc)
}

// NamespaceFor builds the namespace a document's object lives in: from a
// Namespace document of the same stream when there is one, else opted in
// with the given labels and annotations (what --namespace-annotations
// simulates).
func NamespaceFor(name string, docs []Document, labels, annotations map[string]string) mutate.Namespace {
	for _, d := range docs {
		if d.Kind == "Namespace" && d.Name == name {
			var ns corev1.Namespace
			if json.Unmarshal(d.Raw, &ns) == nil {
				return mutate.Namespace{Name: name, Labels: ns.Labels, Annotations: ns.Annotations}
			}
		}
	}
	l := map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}
	for k, v := range labels {
		l[k] = v
	}
	return mutate.Namespace{Name: name, Labels: l, Annotations: annotations}
}
