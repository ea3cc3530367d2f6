package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// object is one document of the input and what the webhooks do with it.
type object struct {
	doc manifest.Document
	// ns is the namespace the object is evaluated in.
	ns string
	// res is nil for kinds graceguard does not act on, and when err is set.
	res *manifest.Result
	// err says why a Pod or workload could not be evaluated: it does not
	// decode as its kind (a field of the wrong type).
	err error
	// nsState says how the namespace was found; see the constants.
	nsState nsState
	// nsDoc is the Namespace document in the input, if any.
	nsDoc *manifest.Document
	// problem is set for a document of a file found in a directory that is
	// not a Kubernetes object; then doc holds only where it is.
	problem *manifest.Problem
	// skip and skipWhy say why the plugin itself leaves the object alone
	// (not a Kubernetes object, owned by a workload), before any webhook.
	skip    mutate.Reason
	skipWhy string
	// notes are the plugin's own findings about the object, whatever its
	// verdict (a Namespace defined again later in the input).
	notes []finding
}

// nsState says where an object's namespace came from.
type nsState int

const (
	// nsSimulated: not in the input (or a live cluster); the simulated
	// opted-in namespace of -n, --mode and --namespace-annotations.
	nsSimulated nsState = iota
	// nsAsWritten: defined in the input (or read from the cluster) and used
	// as it is.
	nsAsWritten
	// nsAssumed: defined in the input (or read from the cluster), evaluated
	// as if opted in (--assume-opted-in).
	nsAssumed
)

// ref names the object for people: "Pod shop/web", "Namespace shop".
func (o object) ref() string {
	if o.problem != nil {
		return o.problem.Source
	}
	name := o.doc.Name
	if name == "" {
		name = "(no name)"
	}
	switch {
	case o.doc.Supported():
		return o.doc.Kind + " " + o.ns + "/" + name
	case o.doc.Namespace != "":
		return o.doc.Kind + " " + o.doc.Namespace + "/" + name
	}
	return o.doc.Kind + " " + name
}

// template reports whether the object is a workload, evaluated through
// its Pod template.
func (o object) template() bool { return o.doc.Kind != "Pod" }

// evaluated reports whether both webhooks' reports are there.
func (o object) evaluated() bool { return o.res != nil && o.res.Mutation != nil }

// input is everything read: the files as written (for mutate's output)
// and the objects with their verdicts.
type input struct {
	files []*manifest.File
	objs  []object
}

// load reads every input and runs the webhooks' decisions on each object.
// Nothing is evaluated unless everything could be read, so a read error
// never comes with half an output; an object that cannot be evaluated is
// reported with its error and the others still are.
func (f *inputFlags) load(ctx context.Context, stdin io.Reader, errOut io.Writer) (*input, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	in := &input{}
	usedStdin := false
	for _, name := range f.files {
		switch {
		case name == "-":
			if usedStdin {
				return nil, fmt.Errorf("-f - given twice: stdin can be read only once")
			}
			usedStdin = true
			file, err := manifest.ReadFile(stdin, "stdin")
			if err != nil {
				return nil, err
			}
			in.files = append(in.files, file)
		case isURL(name):
			file, err := fetch(ctx, name)
			if err != nil {
				return nil, err
			}
			in.files = append(in.files, file)
		default:
			paths, err := expand(name, f.recursive)
			if err != nil {
				return nil, err
			}
			// Files found in a directory may be any YAML (values,
			// workflows): keep going past what is not an object.
			keepGoing := len(paths) != 1 || paths[0] != name
			for _, p := range paths {
				file, err := readFile(p, keepGoing)
				if err != nil {
					return nil, err
				}
				in.files = append(in.files, file)
			}
		}
	}
	var docs []manifest.Document
	for _, file := range in.files {
		docs = append(docs, file.Documents()...)
	}
	if len(docs) == 0 {
		fmt.Fprintf(errOut, "note: no objects in %s\n", strings.Join(f.files, ", "))
	}
	objs := f.evaluate(docs, func(name string) (mutate.Namespace, *manifest.Document, bool) {
		defs := manifest.NamespaceDefinitions(name, docs)
		if len(defs) == 0 {
			return mutate.Namespace{}, nil, false
		}
		last := defs[len(defs)-1]
		return last.Namespace, &docs[last.Index], true
	}, errOut)
	noteRedefined(objs, docs)
	// Each file's objects and problems, in the order they are written.
	for _, file := range in.files {
		n := len(file.Documents())
		mine := slices.Clone(objs[:n])
		objs = objs[n:]
		for i := range file.Problems {
			pr := &file.Problems[i]
			o := object{doc: manifest.Document{Source: pr.Source, File: file.Source, Line: pr.Line}, problem: pr}
			why := strings.TrimPrefix(pr.Err.Error(), pr.Source+": ")
			if pr.Syntax {
				o.err = errors.New(why)
			} else {
				o.skip, o.skipWhy = skipNotObject, why
			}
			mine = append(mine, o)
		}
		slices.SortStableFunc(mine, func(a, b object) int { return a.doc.Line - b.doc.Line })
		in.objs = append(in.objs, mine...)
	}
	return in, nil
}

// noteRedefined warns on each Namespace document that a later one of the
// same name replaces with other labels or annotations: kubectl apply ends
// with the last definition, and graceguard reads that one (the last of NamespaceDefinitions),
// so what the earlier one says applies to nothing. objs are the objects
// of docs, in the same order.
func noteRedefined(objs []object, docs []manifest.Document) {
	done := map[string]bool{}
	for _, d := range docs {
		if d.Kind != "Namespace" || done[d.Name] {
			continue
		}
		done[d.Name] = true
		defs := manifest.NamespaceDefinitions(d.Name, docs)
		if len(defs) < 2 || !differ(defs) {
			continue
		}
		last := docs[defs[len(defs)-1].Index].Source
		for _, def := range defs[:len(defs)-1] {
			o := &objs[def.Index]
			o.skip, o.skipWhy = manifest.SkipNotWorkload, "not a Pod or workload; replaced by its later definition, "+last
			o.notes = append(o.notes, o.locate(finding{Level: levelWarning, Reason: warnNamespaceRedefined, Field: "metadata",
				Message: fmt.Sprintf("metadata: namespace %s is defined again in %s with other labels or annotations; kubectl apply ends with the last definition, so graceguard reads %s and this one, %s, applies to nothing",
					d.Name, last, last, docs[def.Index].Source)}))
		}
	}
}

// warnNamespaceRedefined: a Namespace a later document of the input
// defines again, with other labels or annotations.
const warnNamespaceRedefined mutate.Reason = "namespace-defined-again"

// differ tells whether definitions of one namespace disagree on what
// graceguard reads: its labels and annotations.
func differ(defs []manifest.NamespaceDefinition) bool {
	for _, d := range defs[1:] {
		if !maps.Equal(d.Labels, defs[0].Labels) || !maps.Equal(d.Annotations, defs[0].Annotations) {
			return true
		}
	}
	return false
}

// namespaces finds a namespace as written (in the input, or in the
// cluster), and the document that defines it when it comes from the input.
type namespaces func(name string) (mutate.Namespace, *manifest.Document, bool)

// evaluate runs the decisions on each document. known returns a namespace
// as written (in the input, or in the cluster) when there is one.
func (f *inputFlags) evaluate(docs []manifest.Document, known namespaces, errOut io.Writer) []object {
	simulated := f.mode != "" || len(f.annotations) > 0
	noted := map[string]bool{}
	nsUsed := false
	objs := make([]object, 0, len(docs))
	for _, d := range docs {
		o := object{doc: d, ns: d.Namespace}
		if o.ns == "" {
			o.ns = f.namespace
			nsUsed = nsUsed || d.Supported()
		}
		if !d.Supported() {
			objs = append(objs, o)
			continue
		}
		var ns mutate.Namespace
		ns, o.nsDoc, o.nsState = f.namespaceFor(o.ns, known)
		if simulated && o.nsState == nsAsWritten && !f.assumeOptedIn && !noted[o.ns] {
			noted[o.ns] = true
			fmt.Fprintf(errOut, "note: namespace %s is defined in the input and used as written: --mode and --namespace-annotations do not apply to it (--assume-opted-in applies them over its own)\n", o.ns)
		}
		res, err := manifest.Process(d, ns, f.opts)
		if err != nil {
			o.err = err
		} else {
			o.res = &res
		}
		objs = append(objs, o)
	}
	if f.namespaceSet && !nsUsed && len(docs) > 0 {
		fmt.Fprintf(errOut, "note: -n %s applies to no object: every Pod and workload sets metadata.namespace\n", f.namespace)
	}
	return objs
}

// namespaceFor builds the namespace an object is evaluated in: the one
// written in the input as it is; with --assume-opted-in, that one opted
// in with --mode and --namespace-annotations over its own label and
// annotations; and for a namespace the input does not define, the
// simulated one: opted in, with --mode and --namespace-annotations.
func (f *inputFlags) namespaceFor(name string, known namespaces) (mutate.Namespace, *manifest.Document, nsState) {
	written, doc, ok := known(name)
	if ok && !f.assumeOptedIn {
		return written, doc, nsAsWritten
	}
	state := nsSimulated
	labels, annotations := map[string]string{}, map[string]string{}
	if ok {
		state = nsAssumed
		if written.Labels[mutate.LabelInject] == mutate.LabelInjectEnabled {
			state = nsAsWritten // opted in already; the flags still apply
		}
		maps.Copy(labels, written.Labels)
		maps.Copy(annotations, written.Annotations)
	}
	labels[mutate.LabelInject] = mutate.LabelInjectEnabled
	if f.mode != "" {
		labels[mutate.LabelMode] = string(f.mode)
	}
	maps.Copy(annotations, f.annotations)
	return mutate.Namespace{Name: name, Labels: labels, Annotations: annotations}, doc, state
}

// manifestExts are the file names read from directories.
var manifestExts = []string{".yaml", ".yml", ".json"}

// expand turns a -f argument into the files to read: itself, or the
// manifests in a directory (in lexical order; subdirectories with -R).
func expand(name string, recursive bool) ([]string, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, inputError(name, err)
	}
	if !info.IsDir() {
		return []string{name}, nil
	}
	var out []string
	err = filepath.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return inputError(p, err)
		}
		if d.IsDir() {
			if p != name && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(manifestExts, strings.ToLower(filepath.Ext(p))) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-f %s: directory holds no %s files", name, strings.Join(manifestExts, ", "))
	}
	return out, nil
}

func readFile(name string, keepGoing bool) (*manifest.File, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, inputError(name, err)
	}
	defer fh.Close()
	if keepGoing {
		return manifest.ReadFileKeepGoing(fh, name)
	}
	return manifest.ReadFile(fh, name)
}

// inputError says which -f argument could not be read and what is accepted,
// without repeating the path the *PathError already carries.
func inputError(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("-f %s: %v: want a YAML or JSON file, a directory of them, an http(s) URL, or - for stdin", name, err)
}

func isURL(name string) bool {
	return strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://")
}

// Limits on -f URL: kubectl's own reader waits as long as it takes; a CI
// job should not.
const (
	fetchTimeout = 30 * time.Second
	maxFetchSize = 64 << 20
)

// fetch reads a manifest from an http(s) URL, as kubectl apply -f URL does.
func fetch(ctx context.Context, name string) (*manifest.File, error) {
	u, err := url.Parse(name)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("-f %s: not a valid URL: want http(s)://HOST/PATH", name)
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, name, nil)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %v", name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %v", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("-f %s: GET answered %s, want 200 OK", name, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFetchSize+1))
	if err != nil {
		return nil, fmt.Errorf("-f %s: reading the answer: %v", name, err)
	}
	if len(body) > maxFetchSize {
		return nil, fmt.Errorf("-f %s: the answer is over %d MiB: download it and give the file", name, maxFetchSize>>20)
	}
	return manifest.ReadFile(strings.NewReader(string(body)), name)
}
