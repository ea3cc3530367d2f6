package cli

import (
	"bytes"
	"cmp"
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
	// nsDoc is the Namespace document in the input, if any: its last
	// definition, detached from its text (it may come later in the input).
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

// input is what load found in the input: the files, to be read again
// document by document (walk), and what only the input as a whole says:
// the Namespaces it defines, and how many objects and documents it holds.
// Of the documents it keeps only each Namespace's last definition,
// detached from its text: memory follows the largest document, not the
// input.
type input struct {
	flags *inputFlags
	files []*inputFile
	// objects counts the objects; values the documents that are a JSON
	// value (mutate -o json prints a List when there are several).
	objects, values int
	// namespaces are the Namespaces the input defines, by name, each
	// with its definitions in order.
	namespaces map[string]*nsDefinitions
	// redefined gives, for a Namespace replaced by a later definition
	// with other labels or annotations (by its index among the input's
	// objects), the source of the last definition.
	redefined map[int]string
	// spools are the temporary files stdin and URLs were copied to.
	spools []string
	// workloads are the input's workloads, by workloadKey: a Rollout's
	// spec.workloadRef is looked up here.
	workloads map[string]bool
}

// workloadKey names a workload for workloadRef lookups: "Deployment shop/web".
func workloadKey(kind, namespace, name string) string {
	return kind + " " + namespace + "/" + name
}

// refNote says, for a Rollout skipped as workload-ref, whether the object
// whose template its Pods use is among the objects evaluated.
func refNote(o *object, present map[string]bool) {
	if o.res == nil || o.res.Skip != manifest.SkipWorkloadRef {
		return
	}
	kind, name, _ := strings.Cut(manifest.WorkloadRef(o.doc), " ")
	if present[workloadKey(kind, o.ns, name)] {
		o.res.SkipDetail += fmt.Sprintf("; %s %s's verdict is theirs", kind, name)
	} else {
		o.res.SkipDetail += fmt.Sprintf("; %s %s is not among the inputs: check it", kind, name)
	}
}

// inputFile is one file of the input: a -f argument, a file found in a
// directory, or stdin or a URL copied to a temporary file.
type inputFile struct {
	// source names it in Document.File: a path, a URL or "stdin".
	source string
	// keepGoing is set for files found in a directory: a document that is
	// not an object is reported, not an input error.
	keepGoing bool
	open      func() (io.ReadCloser, error)
	// objects counts the file's objects when load read it.
	objects int
}

// nsDefinitions are a namespace's definitions in the input, in order.
type nsDefinitions struct {
	defs    []manifest.NamespaceDefinition
	sources []string
	// last is the last definition's document, detached from its text.
	last manifest.Document
}

// load reads every input once, document by document, to learn what the
// whole input says (the Namespaces it defines) and to find read errors:
// nothing is evaluated unless everything could be read, so a read error
// never comes with half an output. walk then reads it again and evaluates
// each object; an object that cannot be evaluated is reported with its
// error and the others still are. stdin and URLs, which cannot be read
// twice, are copied to temporary files; close removes them.
func (f *inputFlags) load(ctx context.Context, stdin io.Reader, errOut io.Writer) (_ *input, err error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	in := &input{flags: f, namespaces: map[string]*nsDefinitions{}, redefined: map[int]string{}}
	defer func() {
		if err != nil {
			in.close()
			var te *manifest.TemplateError
			if errors.As(err, &te) && f.command != "" {
				te.Command = f.command
			}
		}
	}()
	notes := &nsNotes{}
	usedStdin := false
	for _, name := range f.files {
		var files []*inputFile
		switch {
		case name == "-":
			if usedStdin {
				return nil, fmt.Errorf("-f - given twice: stdin can be read only once")
			}
			usedStdin = true
			file, err := in.spool(stdin, "stdin", 0)
			if err != nil {
				return nil, err
			}
			files = append(files, file)
		case isURL(name):
			file, err := in.fetch(ctx, name)
			if err != nil {
				return nil, err
			}
			files = append(files, file)
		default:
			paths, err := expand(name, f.recursive)
			if err != nil {
				return nil, err
			}
			// Files found in a directory may be any YAML (values,
			// workflows): keep going past what is not an object.
			keepGoing := len(paths) != 1 || paths[0] != name
			for _, p := range paths {
				files = append(files, &inputFile{source: p, keepGoing: keepGoing, open: openFile(p)})
			}
		}
		for _, file := range files {
			if err := in.scan(file, notes); err != nil {
				return nil, err
			}
			in.files = append(in.files, file)
		}
	}
	if in.objects == 0 {
		fmt.Fprintf(errOut, "note: no objects in %s\n", strings.Join(f.files, ", "))
	}
	notes.write(errOut, f, in.known)
	for _, n := range in.namespaces {
		if len(n.defs) < 2 || !differ(n.defs) {
			continue
		}
		for _, def := range n.defs[:len(n.defs)-1] {
			in.redefined[def.Index] = n.sources[len(n.sources)-1]
		}
	}
	return in, nil
}

// scan reads a file for load: its objects and Namespaces.
func (in *input) scan(file *inputFile, notes *nsNotes) error {
	rc, err := file.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	s := manifest.NewStream(rc, file.source)
	s.SkipPositions = true
	// The whole file is split before a document that is not an object
	// counts: a separator kubectl refuses is the error, wherever it is.
	var bad error
	for {
		p, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if p.Problem != nil && !file.keepGoing {
			if bad == nil {
				bad = p.Problem.Err
			}
			continue
		}
		if p.HasJSON() {
			in.values++
		}
		if slices.ContainsFunc(p.Chunk.Objects, isNamespace) {
			p.Locate() // findings about a namespace are placed in it
		}
		for _, d := range p.Chunk.Objects {
			notes.see(d, in.flags.namespace)
			if d.Supported() {
				if in.workloads == nil {
					in.workloads = map[string]bool{}
				}
				in.workloads[workloadKey(d.Kind, cmp.Or(d.Namespace, in.flags.namespace), d.Name)] = true
			}
			if ns, ok := manifest.NamespaceOf(d); ok {
				n := in.namespaces[ns.Name]
				if n == nil {
					n = &nsDefinitions{}
					in.namespaces[ns.Name] = n
				}
				n.defs = append(n.defs, manifest.NamespaceDefinition{Namespace: ns, Index: in.objects})
				n.sources = append(n.sources, d.Source)
				n.last = d.Detach()
			}
			in.objects++
			file.objects++
		}
	}
	return bad
}

func isNamespace(d manifest.Document) bool { return d.Kind == "Namespace" }

// known finds a namespace the input defines: its last definition, the one
// kubectl apply ends with.
func (in *input) known(name string) (mutate.Namespace, *manifest.Document, bool) {
	n := in.namespaces[name]
	if n == nil {
		return mutate.Namespace{}, nil, false
	}
	return n.defs[len(n.defs)-1].Namespace, &n.last, true
}

// walker is what walk calls, in the input's order: file when a file
// starts, piece for each of its documents with the document's objects
// evaluated (none for a document of only comments), end with the text
// after its last document. file and end may be nil.
type walker struct {
	file  func(source string) error
	piece func(p *manifest.Piece, objs []object) error
	end   func(tail []byte) error
}

// walk reads the input again, document by document: each document is
// read, its objects evaluated and handed to the walker, and dropped
// before the next is read.
func (in *input) walk(w walker) error {
	index := 0
	for _, file := range in.files {
		if err := in.walkFile(file, w, &index); err != nil {
			return err
		}
	}
	return nil
}

func (in *input) walkFile(file *inputFile, w walker, index *int) error {
	rc, err := file.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	if w.file != nil {
		if err := w.file(file.source); err != nil {
			return err
		}
	}
	s := manifest.NewStream(rc, file.source)
	n := 0
	for {
		p, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if p.Problem != nil && !file.keepGoing {
			return p.Problem.Err // it changed since load read it
		}
		objs := make([]object, 0, len(p.Chunk.Objects)+1)
		for _, d := range p.Chunk.Objects {
			o := in.flags.evaluateOne(d, in.known)
			refNote(&o, in.workloads)
			if last, ok := in.redefined[*index]; ok {
				o.replacedBy(last)
			}
			objs = append(objs, o)
			*index++
		}
		n += len(p.Chunk.Objects)
		if pr := p.Problem; pr != nil {
			o := object{doc: manifest.Document{Source: pr.Source, File: file.source, Line: pr.Line}, problem: pr}
			why := strings.TrimPrefix(pr.Err.Error(), pr.Source+": ")
			if pr.Syntax {
				o.err = errors.New(why)
			} else {
				o.skip, o.skipWhy = skipNotObject, why
			}
			objs = append(objs, o)
		}
		// Objects in the order they are written.
		slices.SortStableFunc(objs, func(a, b object) int { return a.doc.Line - b.doc.Line })
		if err := w.piece(p, objs); err != nil {
			return err
		}
	}
	if n != file.objects {
		return fmt.Errorf("-f %s: changed while it was read (%s, then %d): run again", file.source, plural(file.objects, "object"), n)
	}
	if w.end != nil {
		return w.end(s.Tail())
	}
	return nil
}

// each calls fn for each object of the input, in order (see walk).
func (in *input) each(fn func(o object) error) error {
	return in.walk(walker{piece: func(_ *manifest.Piece, objs []object) error {
		for _, o := range objs {
			if err := fn(o); err != nil {
				return err
			}
		}
		return nil
	}})
}

// close removes the temporary files.
func (in *input) close() {
	for _, name := range in.spools {
		os.Remove(name)
	}
	in.spools = nil
}

// spool copies r, which can be read only once, to a temporary file, at
// most limit bytes when limit > 0. Where no temporary file can be made
// (a read-only TMPDIR), it is kept in memory.
func (in *input) spool(r io.Reader, source string, limit int64) (*inputFile, error) {
	if limit > 0 {
		r = io.LimitReader(r, limit+1)
	}
	tmp, err := os.CreateTemp("", "kubectl-graceguard-*.yaml")
	if err != nil {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if limit > 0 && int64(len(b)) > limit {
			return nil, errTooLarge
		}
		return &inputFile{source: source, open: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(b)), nil
		}}, nil
	}
	in.spools = append(in.spools, tmp.Name())
	n, err := io.Copy(markWrites{tmp}, r)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		return nil, fmt.Errorf("%s: copying it to %s: %w", source, tmp.Name(), cerr)
	}
	var we *writeError
	switch {
	case errors.As(err, &we):
		return nil, fmt.Errorf("%s: copying it to %s: %w", source, tmp.Name(), we.err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", source, err)
	case limit > 0 && n > limit:
		return nil, errTooLarge
	}
	return &inputFile{source: source, open: openFile(tmp.Name())}, nil
}

// errTooLarge: spool read more than its limit.
var errTooLarge = errors.New("too large")

// writeError marks an error of the writer in io.Copy, to tell it from
// one of the reader.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// markWrites returns its writer's errors as writeErrors.
type markWrites struct{ w io.Writer }

func (m markWrites) Write(b []byte) (int, error) {
	n, err := m.w.Write(b)
	if err != nil {
		err = &writeError{err}
	}
	return n, err
}

// openFile opens a file of the input; an error says which and what is
// accepted.
func openFile(name string) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		fh, err := os.Open(name)
		if err != nil {
			return nil, inputError(name, err)
		}
		return fh, nil
	}
}

// replacedBy marks a Namespace that a later definition, last, replaces
// with other labels or annotations: kubectl apply ends with the last
// definition, and graceguard reads that one (input.known), so what this
// one says applies to nothing.
func (o *object) replacedBy(last string) {
	o.skip, o.skipWhy = manifest.SkipNotWorkload, "not a Pod or workload; replaced by its later definition, "+last
	o.notes = append(o.notes, o.locate(finding{Level: levelWarning, Reason: warnNamespaceRedefined, Field: "metadata",
		Message: fmt.Sprintf("metadata: namespace %s is defined again in %s with other labels or annotations; kubectl apply ends with the last definition, so graceguard reads %s and this one, %s, applies to nothing",
			o.doc.Name, last, last, o.doc.Source)}))
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
	notes := &nsNotes{}
	objs := make([]object, 0, len(docs))
	present := map[string]bool{}
	for _, d := range docs {
		present[workloadKey(d.Kind, cmp.Or(d.Namespace, f.namespace), d.Name)] = true
	}
	for _, d := range docs {
		notes.see(d, f.namespace)
		o := f.evaluateOne(d, known)
		refNote(&o, present)
		objs = append(objs, o)
	}
	notes.write(errOut, f, known)
	return objs
}

// evaluateOne runs the decisions on one document.
func (f *inputFlags) evaluateOne(d manifest.Document, known namespaces) object {
	o := object{doc: d, ns: d.Namespace}
	if o.ns == "" {
		o.ns = f.namespace
	}
	if !d.Supported() {
		return o
	}
	var ns mutate.Namespace
	ns, o.nsDoc, o.nsState = f.namespaceFor(o.ns, known)
	res, err := manifest.Process(d, ns, f.opts)
	if err != nil {
		o.err = err
	} else {
		o.res = &res
	}
	return o
}

// nsNotes gathers what the notes on the namespace flags need to know
// about the objects: the namespaces of the Pods and workloads, in the
// order they are first seen, and whether any is in -n's.
type nsNotes struct {
	used    []string
	seen    map[string]bool
	objects bool
	nsUsed  bool
}

func (n *nsNotes) see(d manifest.Document, fallback string) {
	n.objects = true
	if !d.Supported() {
		return
	}
	ns := d.Namespace
	if ns == "" {
		ns, n.nsUsed = fallback, true
	}
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	if !n.seen[ns] {
		n.seen[ns] = true
		n.used = append(n.used, ns)
	}
}

// write notes, on errOut, the namespaces defined in the input that --mode
// and --namespace-annotations do not apply to, and a -n that applies to
// no object.
func (n *nsNotes) write(errOut io.Writer, f *inputFlags, known namespaces) {
	simulated := f.mode != "" || len(f.annotations) > 0
	for _, ns := range n.used {
		if _, _, state := f.namespaceFor(ns, known); simulated && state == nsAsWritten && !f.assumeOptedIn {
			fmt.Fprintf(errOut, "note: namespace %s is defined in the input and used as written: --mode and --namespace-annotations do not apply to it (--assume-opted-in applies them over its own)\n", ns)
		}
	}
	if f.namespaceSet && !n.nsUsed && n.objects {
		fmt.Fprintf(errOut, "note: -n %s applies to no object: every Pod and workload sets metadata.namespace\n", f.namespace)
	}
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

// fetch reads a manifest from an http(s) URL, as kubectl apply -f URL does,
// into a temporary file.
func (in *input) fetch(ctx context.Context, name string) (*inputFile, error) {
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
	file, err := in.spool(resp.Body, name, maxFetchSize)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, fmt.Errorf("-f %s: the answer is over %d MiB: download it and give the file", name, maxFetchSize>>20)
	case err != nil:
		return nil, fmt.Errorf("-f %s: reading the answer: %v", name, strings.TrimPrefix(err.Error(), name+": "))
	}
	return file, nil
}
