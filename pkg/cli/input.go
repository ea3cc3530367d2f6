package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// object is one document of the input and what the webhooks do with it.
type object struct {
	doc manifest.Document
	// ns is the namespace the object is evaluated in.
	ns string
	// res is nil for kinds graceguard does not act on.
	res *manifest.Result
}

// ref names the object for people: "Pod shop/web", "Namespace shop".
func (o object) ref() string {
	name := o.doc.Name
	if name == "" {
		name = "(no name)"
	}
	switch {
	case o.res != nil:
		return o.doc.Kind + " " + o.ns + "/" + name
	case o.doc.Namespace != "":
		return o.doc.Kind + " " + o.doc.Namespace + "/" + name
	}
	return o.doc.Kind + " " + name
}

// template reports whether the object is a workload, evaluated through
// its Pod template.
func (o object) template() bool { return o.doc.Kind != "Pod" }

// load reads every input and runs the webhooks' decisions on each object.
// Nothing is evaluated unless everything could be read, so an error never
// comes with half an output.
func (f *inputFlags) load(stdin io.Reader, errOut io.Writer) ([]object, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	var docs []manifest.Document
	usedStdin := false
	for _, name := range f.files {
		if name == "-" {
			if usedStdin {
				return nil, fmt.Errorf("-f - given twice: stdin can be read only once")
			}
			usedStdin = true
			got, err := manifest.Read(stdin, "stdin")
			if err != nil {
				return nil, err
			}
			docs = append(docs, got...)
			continue
		}
		paths, err := expand(name, f.recursive)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			got, err := readFile(p)
			if err != nil {
				return nil, err
			}
			docs = append(docs, got...)
		}
	}
	if len(docs) == 0 {
		fmt.Fprintf(errOut, "note: no objects in %s\n", strings.Join(f.files, ", "))
	}

	var labels map[string]string
	if f.mode != "" {
		labels = map[string]string{mutate.LabelMode: string(f.mode)}
	}
	simulated := f.mode != "" || len(f.annotations) > 0
	noted := map[string]bool{}
	objs := make([]object, 0, len(docs))
	for _, d := range docs {
		o := object{doc: d, ns: d.Namespace}
		if o.ns == "" {
			o.ns = f.namespace
		}
		if !d.Supported() {
			objs = append(objs, o)
			continue
		}
		if simulated && !noted[o.ns] && definesNamespace(docs, o.ns) {
			noted[o.ns] = true
			fmt.Fprintf(errOut, "note: namespace %s is defined in the input and used as it is: --mode and --namespace-annotations do not apply to it\n", o.ns)
		}
		ns := manifest.NamespaceFor(o.ns, docs, labels, f.annotations)
		res, err := manifest.Process(d, ns, f.opts)
		if err != nil {
			return nil, err
		}
		o.res = &res
		objs = append(objs, o)
	}
	return objs, nil
}

func definesNamespace(docs []manifest.Document, name string) bool {
	return slices.ContainsFunc(docs, func(d manifest.Document) bool { return d.Kind == "Namespace" && d.Name == name })
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

func readFile(name string) ([]manifest.Document, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, inputError(name, err)
	}
	defer fh.Close()
	return manifest.Read(fh, name)
}

// inputError says which -f argument could not be read and what is accepted,
// without repeating the path the *PathError already carries.
func inputError(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("-f %s: %v: want a YAML or JSON file, a directory of them, or - for stdin", name, err)
}
