// Package manifest runs graceguard's decisions offline, on the YAML or JSON
// documents people keep in git: the kubectl plugin and the golden tests
// both use it, so they see exactly what the webhook would do.
//
// Invariants: the output object is the input document with the webhook's
// JSON patch applied, so fields this module's Go types do not know survive;
// written back as YAML (Piece.Render), a file keeps every byte graceguard
// does not add to: comments, key order, quoting, blank lines, and Lists
// stay Lists. A document graceguard cannot evaluate (a patch without a Pod
// template, a kind it does not know) is reported as skipped, never fatal.
// A stream is read one document at a time (Stream), so a reader that
// drops each document before the next holds no more than the largest.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// Why the plugin leaves a document alone before either webhook would see it.
// (The webhooks' own skip reasons are mutate's Skip* reasons.)
const (
	// SkipNotWorkload: neither a Pod nor one of mutate.Workloads.
	SkipNotWorkload mutate.Reason = "not-a-workload"
	// SkipNoTemplate: a workload without a Pod template, or a Pod without
	// containers: a kustomize patch or another partial object, which the
	// API server would refuse as it is.
	SkipNoTemplate mutate.Reason = "no-pod-template"
	// SkipWorkloadRef: an Argo Rollouts Rollout with spec.workloadRef. It
	// has no template of its own; its Pods use the referenced Deployment's,
	// which is evaluated as that Deployment.
	SkipWorkloadRef mutate.Reason = "workload-ref"
)

// Document is one object read from a stream.
type Document struct {
	// Source says where it came from: "FILE#N" (N counts documents from 1),
	// "FILE#N.items[I]" for an item of a List.
	Source     string
	Raw        []byte // the object as JSON
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	// UID is the object's, for an object read from a cluster (Live).
	UID string
	// File is the input it was read from (a path, a URL or "stdin"); Line
	// and Column locate the object's first field in it (0 when unknown).
	File         string
	Line, Column int
	// Pointer is the object's JSON pointer in its document: "" or, for an
	// item of a List, "/items/I".
	Pointer string
	// node is the object's mapping in the parsed document while it is
	// read; it is dropped then, so a stream's parse trees are not all held
	// at once, and Locate parses text again (see parsed).
	node *kyaml.Node
	// text is the document's text, a part of File.Text (not a copy); nil
	// when the document could be read as JSON but not parsed for positions.
	text []byte
	// lineOffset is added to node lines: the document's first line in File.
	lineOffset int
	// places replace text in a detached document (see Detach).
	places map[string]place
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
	f, err := ReadFile(r, source)
	if err != nil {
		return nil, err
	}
	return f.Documents(), nil
}

// Documents are the objects of every document of the file, Lists flattened.
func (f *File) Documents() []Document {
	var out []Document
	for _, c := range f.Chunks {
		out = append(out, c.Objects...)
	}
	return out
}

// split reads one document's JSON into objects, flattening a List. node is
// the document's root mapping (nil when unknown); pointer is its JSON
// pointer in the document.
func split(raw []byte, src, pointer string, node *kyaml.Node) ([]Document, bool, error) {
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, false, fmt.Errorf("%s: not a Kubernetes object (want a mapping with apiVersion and kind): %w", src, err)
	}
	if h.Kind == "" || h.APIVersion == "" {
		return nil, false, fmt.Errorf("%s: not a Kubernetes object: apiVersion and kind are required", src)
	}
	if strings.HasSuffix(h.Kind, "List") && h.Items != nil {
		items := lookup(node, "items")
		var out []Document
		for i, item := range h.Items {
			var in *kyaml.Node
			if items != nil && items.Kind == kyaml.SequenceNode && i < len(items.Content) {
				in = items.Content[i]
			}
			got, _, err := split(item, fmt.Sprintf("%s.items[%d]", src, i), fmt.Sprintf("%s/items/%d", pointer, i), in)
			if err != nil {
				return nil, false, err
			}
			out = append(out, got...)
		}
		return out, true, nil
	}
	name := h.Metadata.Name
	if name == "" && h.Metadata.GenerateName != "" {
		name = h.Metadata.GenerateName
	}
	d := Document{Source: src, Raw: raw, APIVersion: h.APIVersion, Kind: h.Kind, Namespace: h.Metadata.Namespace, Name: name, Pointer: pointer, node: node}
	return []Document{d}, false, nil
}

// Supported reports whether graceguard acts on documents of this kind.
func (d Document) Supported() bool {
	if d.Kind == "Pod" && d.APIVersion == "v1" {
		return true
	}
	_, _, ok := mutate.LookupWorkloadVersion(d.APIVersion, d.Kind)
	return ok
}

// Legacy returns the no longer served API version the document is written
// with, or nil.
func (d Document) Legacy() *mutate.LegacyVersion {
	_, l, _ := mutate.LookupWorkloadVersion(d.APIVersion, d.Kind)
	return l
}

// Result is what the webhooks would do with one document.
type Result struct {
	Doc Document
	// Skip, when set, says why the document was not evaluated at all
	// (SkipNoTemplate); SkipDetail says it for people. Then Mutation and
	// Validation are nil and Object is the document as it was.
	Skip       mutate.Reason
	SkipDetail string
	// Object is the document as the mutating webhook would leave it (for
	// workloads: with its template as the Pods would be), as JSON.
	Object []byte
	// Mutation and Validation are the two webhooks' reports.
	Mutation, Validation *mutate.Report
}

// Process runs both webhooks' decisions on a Pod or workload document. A
// document without a Pod template is skipped (Result.Skip); an error means
// the document does not decode as its kind.
func Process(d Document, ns mutate.Namespace, opts mutate.Options) (Result, error) {
	res := Result{Doc: d, Object: d.Raw}
	if ref := WorkloadRef(d); ref != "" {
		res.Skip = SkipWorkloadRef
		res.SkipDetail = fmt.Sprintf("its Pods use the Pod template of %s (spec.workloadRef)", ref)
		return res, nil
	}
	if detail := missingTemplate(d); detail != "" {
		res.Skip, res.SkipDetail = SkipNoTemplate, detail
		return res, nil
	}
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
	res.Validation = mutate.ValidateMutated(vt, ns, opts)
	return res, nil
}

// WorkloadRef returns the object an Argo Rollouts Rollout takes its Pod
// template from ("Deployment web"), or "" when d is no Rollout with
// spec.workloadRef and no template of its own.
func WorkloadRef(d Document) string {
	if d.Kind != "Rollout" {
		return ""
	}
	var r mutate.Rollout
	if json.Unmarshal(d.Raw, &r) != nil || r.Spec.WorkloadRef == nil || r.Spec.Template != nil {
		return ""
	}
	kind := r.Spec.WorkloadRef.Kind
	if kind == "" {
		kind = "Deployment"
	}
	return kind + " " + r.Spec.WorkloadRef.Name
}

// missingTemplate says what a Pod or workload lacks to be evaluated, or "".
// The API server refuses such objects, so they are patches or fragments
// (kustomize's `spec: {replicas: 3}`, a CronJob without jobTemplate); their
// Pods are checked where the whole object is.
func missingTemplate(d Document) string {
	var obj map[string]any
	if json.Unmarshal(d.Raw, &obj) != nil {
		return "" // decode reports it
	}
	ptr := ""
	if d.Kind != "Pod" {
		w, _, ok := mutate.LookupWorkloadVersion(d.APIVersion, d.Kind)
		if !ok {
			return ""
		}
		ptr = w.Pointer()
	}
	at := func(p string) any {
		var v any = obj
		for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[tok]
		}
		return v
	}
	path := strings.ReplaceAll(strings.TrimPrefix(ptr+"/spec/containers", "/"), "/", ".")
	if d.Kind != "Pod" {
		if _, ok := at(ptr).(map[string]any); !ok {
			return fmt.Sprintf("no Pod template (%s): a patch or a fragment? Check the whole object, e.g. kustomize build DIR | kubectl graceguard check -f -",
				strings.ReplaceAll(strings.TrimPrefix(ptr, "/"), "/", "."))
		}
	}
	if cs, ok := at(ptr + "/spec/containers").([]any); !ok || len(cs) == 0 {
		return fmt.Sprintf("no containers (%s): a patch or a fragment? Check the whole object, e.g. kustomize build DIR | kubectl graceguard check -f -", path)
	}
	return ""
}

func decode(d Document) (mutate.Target, error) {
	if d.Kind == "Pod" {
		var pod corev1.Pod
		if err := json.Unmarshal(d.Raw, &pod); err != nil {
			return mutate.Target{}, fmt.Errorf("%s: decoding Pod %s: %w", d.Source, d.Name, err)
		}
		return mutate.ForPod(&pod), nil
	}
	w, _, ok := mutate.LookupWorkloadVersion(d.APIVersion, d.Kind)
	if !ok {
		return mutate.Target{}, fmt.Errorf("%s: unsupported kind %s %s: want v1 Pod or one of %v", d.Source, d.APIVersion, d.Kind, mutate.WorkloadKinds)
	}
	// A legacy version's Pod template has the served version's shape.
	obj := w.New()
	if err := json.Unmarshal(d.Raw, obj); err != nil {
		return mutate.Target{}, fmt.Errorf("%s: decoding %s %s: %w", d.Source, d.Kind, d.Name, err)
	}
	t, err := mutate.ForWorkload(obj)
	if err != nil {
		return t, fmt.Errorf("%s: %w", d.Source, err)
	}
	return t, nil
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

// NamespaceDefinition is one Namespace document of a name, as graceguard
// reads it (NamespaceOf).
type NamespaceDefinition struct {
	mutate.Namespace
	// Index is the document's index in the documents read.
	Index int
}

// NamespaceOf reads a v1 Namespace document as graceguard reads a
// namespace: its name, labels and annotations. ok is false for any other
// document, and for a Namespace that does not decode.
func NamespaceOf(d Document) (ns mutate.Namespace, ok bool) {
	if d.Kind != "Namespace" || d.APIVersion != "v1" {
		return mutate.Namespace{}, false
	}
	var n corev1.Namespace
	if json.Unmarshal(d.Raw, &n) != nil {
		return mutate.Namespace{}, false
	}
	return mutate.Namespace{Name: d.Name, Labels: n.Labels, Annotations: n.Annotations}, true
}

// toJSON converts one YAML or JSON document to JSON the way kubectl reads
// it (sigs.k8s.io/yaml).
func toJSON(doc []byte) ([]byte, error) {
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	return bytes.TrimSpace(raw), nil
}
