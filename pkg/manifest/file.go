package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// File is one input read whole: its exact text and its documents. The
// plugin reads its inputs document by document instead (Stream); Read
// and the tests read files whole.
type File struct {
	// Source names it as given: a path, a URL or "stdin".
	Source string
	Text   []byte
	Chunks []*Chunk
	// fallbacks counts the documents Render could not splice (tests).
	fallbacks int
}

// Problem is a document that is not a Kubernetes object.
type Problem struct {
	Source string
	Line   int
	// Syntax is set when the document is not valid YAML or JSON; otherwise
	// it is YAML without apiVersion and kind (a values.yaml, a CI workflow).
	Syntax bool
	Err    error
}

// Chunk is one document of a stream: where its text is, and the objects it
// holds (one, or a List's items; none for a document of only comments).
type Chunk struct {
	// N counts the file's documents from 1, as Document.Source does.
	N int
	// Start and End are the byte offsets of the document's text in the
	// file; the "---" lines around it are not part of it.
	Start, End int
	// Line is the file line Start is on, from 1.
	Line int
	// JSON is set when the document is written as JSON.
	JSON bool
	// List is set when the document is a List (its Objects are the items).
	List    bool
	Objects []Document
	// raw is the document as JSON (a List whole).
	raw []byte
}

// ReadFile reads a stream of YAML documents separated by "---" lines (or
// JSON objects) whole and keeps its text. Lists are read item by item. An
// error names the source and the document number: the first document
// that is not a Kubernetes object, once the whole stream could be split.
func ReadFile(r io.Reader, source string) (*File, error) {
	text, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	f := &File{Source: source, Text: text}
	var bad error
	s := NewStream(bytes.NewReader(text), source)
	for {
		p, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		c := p.Chunk
		f.Chunks = append(f.Chunks, c)
		// One copy of the text: the documents' is the file's.
		for j := range c.Objects {
			if c.Objects[j].text != nil {
				c.Objects[j].text = text[c.Start:c.End]
			}
		}
		if p.Problem != nil && bad == nil {
			bad = p.Problem.Err
		}
	}
	if bad != nil {
		return nil, bad
	}
	return f, nil
}

// notYAML says why a document cannot be read. A Helm or Go template fails
// with the parser's internals (an "invalid map key" of Go types): name the
// template and the command that renders it instead.
func notYAML(src string, doc []byte, err error) error {
	if bytes.Contains(doc, []byte("{{")) {
		return &TemplateError{Source: src}
	}
	return fmt.Errorf("%s: not valid YAML or JSON: %w", src, err)
}

// TemplateError is a document that holds template actions ({{ ... }}), as a
// Helm chart's templates do. Its message names the command to pipe the
// rendered chart into: Command, or check when it is unset.
type TemplateError struct {
	Source  string
	Command string
}

func (e *TemplateError) Error() string {
	cmd := e.Command
	if cmd == "" {
		cmd = "check"
	}
	return fmt.Sprintf("%s: not valid YAML or JSON: it holds template actions ({{ ... }}), as a Helm chart's templates do; render it first and pipe the result in (helm template CHART | kubectl graceguard %s -f -)", e.Source, cmd)
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

// leadingLines counts the blank and comment lines before a document's content.
func leadingLines(doc []byte) int {
	n := 0
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return n
		}
		n++
	}
	return 0
}

// parseNode parses one document for positions and edits; nil when yaml.v3
// cannot read it.
func parseNode(doc []byte) *kyaml.Node {
	var n kyaml.Node
	if err := kyaml.Unmarshal(doc, &n); err != nil || n.Kind != kyaml.DocumentNode || len(n.Content) == 0 {
		return nil
	}
	return n.Content[0]
}

// lookup returns the value of key in a mapping node, or nil.
func lookup(n *kyaml.Node, key string) *kyaml.Node {
	if n == nil || n.Kind != kyaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// Locate finds a field of the object, given as a field path the way
// Kubernetes prints them (spec.containers[0].lifecycle.preStop,
// metadata.annotations[graceguard.io/max-work]), and returns the line and
// column (from 1) of its nearest part present in the file: a field
// graceguard would add is located at the object that would hold it. It
// returns the object's own position when nothing of the path is there,
// and zeros when positions are unknown.
func (d Document) Locate(path string) (line, column int) {
	if d.places != nil {
		return d.locatePlaces(path)
	}
	n := objectNode(parsed(d.text), d.Pointer)
	if n == nil {
		return d.Line, d.Column
	}
	for _, tok := range fieldTokens(path) {
		var at, next *kyaml.Node
		switch n.Kind {
		case kyaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					at, next = n.Content[i], n.Content[i+1]
				}
			}
		case kyaml.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				at, next = n.Content[i], n.Content[i]
			}
		}
		if next == nil {
			break
		}
		// A key's position, not its value's: a value may start a line later.
		line, column = at.Line, at.Column
		n = next
	}
	if line == 0 {
		return d.Line, d.Column
	}
	return d.lineOffset + line, column
}

// lastParsed holds the parse tree of the document Locate read last: the
// findings of one document are located one after another, so each
// document is parsed once, and only one tree is held at a time.
var lastParsed struct {
	sync.Mutex
	text []byte
	root *kyaml.Node
}

// parsed returns the root mapping of a document's text, nil for none.
func parsed(text []byte) *kyaml.Node {
	if len(text) == 0 {
		return nil
	}
	lastParsed.Lock()
	defer lastParsed.Unlock()
	if len(lastParsed.text) != len(text) || &lastParsed.text[0] != &text[0] {
		lastParsed.text, lastParsed.root = text, parseNode(text)
	}
	return lastParsed.root
}

// objectNode walks a document's root to the object at a JSON pointer
// ("" or "/items/I", nested for Lists of Lists).
func objectNode(root *kyaml.Node, pointer string) *kyaml.Node {
	n := root
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if tok == "" || n == nil {
			continue
		}
		switch n.Kind {
		case kyaml.MappingNode:
			n = lookup(n, tok)
		case kyaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
		default:
			return nil
		}
	}
	return n
}

// fieldTokens splits a field path: "a.b[0].c[key/with.dots]" is a, b, 0, c,
// key/with.dots.
func fieldTokens(path string) []string {
	var out []string
	for len(path) > 0 {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return append(out, path[1:])
			}
			out = append(out, path[1:end])
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				return append(out, path)
			}
			out = append(out, path[:end])
			path = path[end:]
		}
	}
	return out
}

// errNotSpliced says a change could not be written into the text as it is.
var errNotSpliced = errors.New("not spliced")
