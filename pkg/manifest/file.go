package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// File is one input as read: its exact text and its documents.
type File struct {
	// Source names it as given: a path, a URL or "stdin".
	Source string
	Text   []byte
	Chunks []*Chunk
	// Problems are the documents that are not Kubernetes objects, when read
	// with ReadFileKeepGoing.
	Problems []Problem
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

// Chunk is one document of a File: where its text is, and the objects it
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
// JSON objects) and keeps its text, so Render can write it back with only
// graceguard's additions. Lists are read item by item. An error names the
// source and the document number.
func ReadFile(r io.Reader, source string) (*File, error) {
	return readFile(r, source, false)
}

// ReadFileKeepGoing is ReadFile for files found in a directory, which may
// hold YAML that is not Kubernetes objects: each such document is recorded
// in File.Problems and the others are read. It fails only when the file
// cannot be split into documents.
func ReadFileKeepGoing(r io.Reader, source string) (*File, error) {
	return readFile(r, source, true)
}

func readFile(r io.Reader, source string, keepGoing bool) (*File, error) {
	text, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	f := &File{Source: source, Text: text}
	spans, err := splitDocuments(text)
	if err != nil {
		return nil, fmt.Errorf("%s: reading YAML: %w", source, err)
	}
	for i, s := range spans {
		c := &Chunk{N: i + 1, Start: s.start, End: s.end, Line: s.line}
		f.Chunks = append(f.Chunks, c)
		src := fmt.Sprintf("%s#%d", source, c.N)
		doc := text[s.start:s.end]
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		line := c.Line + leadingLines(doc)
		raw, err := toJSON(doc)
		if err != nil {
			err = notYAML(src, doc, err)
			if !keepGoing {
				return nil, err
			}
			f.Problems = append(f.Problems, Problem{Source: src, Line: line, Syntax: true, Err: err})
			continue
		}
		if bytes.Equal(raw, []byte("null")) {
			continue
		}
		first := bytes.TrimLeft(stripComments(doc), " \t\r\n")
		c.JSON = len(first) > 0 && first[0] == '{'
		// JSON as written keeps its key order through the patch.
		var compact bytes.Buffer
		if c.JSON && json.Compact(&compact, doc) == nil {
			raw = compact.Bytes()
		}
		// Positions are a help (SARIF regions, Locate), not a need: a
		// document kubectl reads but yaml.v3 does not still gets checked.
		root := parseNode(doc)
		objs, list, err := split(raw, src, "", root)
		if err != nil {
			if !keepGoing {
				return nil, err
			}
			f.Problems = append(f.Problems, Problem{Source: src, Line: line, Err: err})
			continue
		}
		c.raw = raw
		c.List = list
		for j := range objs {
			objs[j].File = source
			objs[j].lineOffset = c.Line - 1
			if n := objs[j].node; n != nil {
				objs[j].Line, objs[j].Column = objs[j].lineOffset+n.Line, n.Column
				objs[j].text = doc
			} else {
				objs[j].Line = line
			}
			objs[j].node = nil
		}
		c.Objects = objs
	}
	return f, nil
}

// notYAML says why a document cannot be read. A Helm or Go template fails
// with the parser's internals (an "invalid map key" of Go types): name the
// template and the command that renders it instead.
func notYAML(src string, doc []byte, err error) error {
	if bytes.Contains(doc, []byte("{{")) {
		return fmt.Errorf("%s: not valid YAML or JSON: it holds template actions ({{ ... }}), as a Helm chart's templates do; render it first and pipe the result in (helm template CHART | kubectl graceguard check -f -)", src)
	}
	return fmt.Errorf("%s: not valid YAML or JSON: %w", src, err)
}

// span is a document's place in a file.
type span struct{ start, end, line int }

// splitDocuments finds the documents of a YAML stream the way kubectl's
// reader (k8s.io/apimachinery/pkg/util/yaml.YAMLReader) does: a line
// starting with "---" and followed by nothing but blanks or a comment
// separates documents.
func splitDocuments(text []byte) ([]span, error) {
	var out []span
	start, startLine, line := 0, 1, 1
	for pos := 0; pos < len(text); line++ {
		end := bytes.IndexByte(text[pos:], '\n')
		next := len(text)
		if end >= 0 {
			next = pos + end + 1
		}
		l := text[pos:next]
		if bytes.HasPrefix(l, []byte("---")) {
			rest := bytes.TrimSpace(l[3:])
			if len(rest) > 0 && rest[0] != '#' {
				return nil, fmt.Errorf("line %d: invalid document separator %q: only a comment may follow ---", line, strings.TrimSpace(string(l)))
			}
			out = append(out, span{start, pos, startLine})
			start, startLine = next, line+1
		}
		pos = next
	}
	out = append(out, span{start, len(text), startLine})
	// The reader yields no empty document (two separators in a row, or
	// one at the start or the end): keep the numbering kubectl's errors use.
	// Comments before the first "---" are the stream's prefix in YAML, not
	// a document (a licence header): they are not counted either. The text
	// outside the spans is written back as it is.
	kept := out[:0]
	for i, s := range out {
		if i == 0 && len(out) > 1 && len(bytes.TrimSpace(stripComments(text[s.start:s.end]))) == 0 {
			continue
		}
		s.end = documentEnd(text, s)
		if s.start < s.end {
			kept = append(kept, s)
		}
	}
	return kept, nil
}

// documentEnd is where a document's content ends: at a "..." line (YAML's
// document end marker, followed by nothing but blanks or a comment), or at
// its span's end. What follows the marker is kept as text between
// documents, so the marker survives Render.
func documentEnd(text []byte, s span) int {
	for pos := s.start; pos < s.end; {
		next := s.end
		if i := bytes.IndexByte(text[pos:s.end], '\n'); i >= 0 {
			next = pos + i + 1
		}
		if l := text[pos:next]; bytes.HasPrefix(l, []byte("...")) {
			if rest := bytes.TrimSpace(l[3:]); len(rest) == 0 || rest[0] == '#' {
				return pos
			}
		}
		pos = next
	}
	return s.end
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
