package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// Stream reads a stream of YAML documents separated by "---" lines (or
// JSON objects) one document at a time: it holds the text of the document
// it is reading and no other, so a caller that drops each Piece before it
// asks for the next holds no more than the largest document, whatever the
// stream's length. ReadFile reads a whole file through it.
type Stream struct {
	// SkipPositions reads documents without parsing them for the place of
	// each object (Document.Line is then the document's first content
	// line, and Locate answers it): a pass that only counts objects and
	// collects Namespaces reads twice as fast. Piece.Locate parses one.
	SkipPositions bool

	r      *bufio.Reader
	source string
	// offset counts the bytes read; line is the number of the next line.
	offset, line int
	// spans counts the spans between separators ended so far, documents
	// or not; n counts the documents returned (Chunk.N).
	spans, n int
	// span is the text since the last separator, from offset spanAt and
	// line spanLine.
	span             []byte
	spanAt, spanLine int
	// between is the text read since the last document that belongs to
	// none: separators, a header of comments, what follows a "..." marker.
	between []byte
	// pending is a document found with the separator after it, returned
	// by the next call.
	pending *Piece
	eof     bool
}

// Piece is one document of a Stream.
type Piece struct {
	// Source is the stream's.
	Source string
	// Before is the text between the previous document (or the stream's
	// start) and this one that belongs to no document: "---" lines, a
	// header of comments, what follows a "..." end marker. Written back
	// with Text, the Pieces and Stream.Tail are the stream byte for byte.
	Before []byte
	// Text is the document's text, from the stream's offset Chunk.Start.
	Text  []byte
	Chunk *Chunk
	// Problem is set when the document is not a Kubernetes object (not
	// YAML, or YAML without apiVersion and kind); Chunk.Objects is empty.
	Problem *Problem
}

// NewStream reads the documents of r; source names it in Document.Source
// and in errors.
func NewStream(r io.Reader, source string) *Stream {
	return &Stream{r: bufio.NewReaderSize(r, 64<<10), source: source, line: 1, spanLine: 1}
}

// Next returns the next document, and io.EOF after the last one (then
// Tail holds the text after it). Another error is one kubectl's reader
// fails on too (a separator followed by more than a comment) or a read
// error: the stream cannot be split further. A document that is not a
// Kubernetes object is not an error but a Piece with its Problem.
func (s *Stream) Next() (*Piece, error) {
	for {
		if p := s.pending; p != nil {
			s.pending = nil
			return p, nil
		}
		if s.eof {
			return nil, io.EOF
		}
		l, err := s.r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w", s.source, err)
		}
		if len(l) > 0 {
			if bytes.HasPrefix(l, []byte("---")) {
				rest := bytes.TrimSpace(l[3:])
				if len(rest) > 0 && rest[0] != '#' {
					return nil, fmt.Errorf("%s: reading YAML: line %d: invalid document separator %q: only a comment may follow ---",
						s.source, s.line, strings.TrimSpace(string(l)))
				}
				s.pending = s.endSpan(false)
				s.between = append(s.between, l...)
				s.offset += len(l)
				s.line++
				s.span, s.spanAt, s.spanLine = nil, s.offset, s.line
				continue
			}
			s.span = append(s.span, l...)
			s.offset += len(l)
			s.line++
		}
		if err != nil {
			s.eof = true
			s.pending = s.endSpan(true)
		}
	}
}

// Tail is the text after the last document, once Next returned io.EOF.
func (s *Stream) Tail() []byte { return s.between }

// endSpan ends the span read so far, at a separator or at the stream's
// end (last), and returns its document, if it is one. The reader yields
// no empty document (two separators in a row, or one at the start or the
// end): keep the numbering kubectl's errors use. Comments before the first
// "---" are the stream's prefix in YAML, not a document (a licence
// header): they are not counted either. The text of neither is lost: it
// goes into Before.
func (s *Stream) endSpan(last bool) *Piece {
	span, first := s.span, s.spans == 0
	s.spans++
	if first && !last && len(bytes.TrimSpace(stripComments(span))) == 0 {
		s.between = append(s.between, span...)
		return nil
	}
	end := documentEnd(span)
	if end == 0 {
		s.between = append(s.between, span...)
		return nil
	}
	s.n++
	c := &Chunk{N: s.n, Start: s.spanAt, End: s.spanAt + end, Line: s.spanLine}
	p := &Piece{Source: s.source, Before: s.between, Text: span[:end], Chunk: c}
	// The rest is copied: span's array is the document's, and the
	// document's slice must not be written by what comes after it.
	s.between = append([]byte(nil), span[end:]...)
	p.Problem = readChunk(c, p.Text, s.source, !s.SkipPositions)
	return p
}

// documentEnd is where a document's content ends: at a "..." line (YAML's
// document end marker, followed by nothing but blanks or a comment), or at
// its span's end. What follows the marker is kept as text between
// documents, so the marker survives Render.
func documentEnd(span []byte) int {
	for pos := 0; pos < len(span); {
		next := len(span)
		if i := bytes.IndexByte(span[pos:], '\n'); i >= 0 {
			next = pos + i + 1
		}
		if l := span[pos:next]; bytes.HasPrefix(l, []byte("...")) {
			if rest := bytes.TrimSpace(l[3:]); len(rest) == 0 || rest[0] == '#' {
				return pos
			}
		}
		pos = next
	}
	return len(span)
}

// readChunk reads one document's text into c: whether it is JSON, its
// objects and, with positions, where each is. It returns the Problem when
// the document is not a Kubernetes object.
func readChunk(c *Chunk, doc []byte, source string, positions bool) *Problem {
	src := fmt.Sprintf("%s#%d", source, c.N)
	if len(bytes.TrimSpace(stripComments(doc))) == 0 {
		return nil
	}
	line := c.Line + leadingLines(doc)
	raw, err := toJSON(doc)
	if err != nil {
		return &Problem{Source: src, Line: line, Syntax: true, Err: notYAML(src, doc, err)}
	}
	if bytes.Equal(raw, []byte("null")) {
		return nil
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
	var root *kyaml.Node
	if positions {
		root = parseNode(doc)
	}
	objs, list, err := split(raw, src, "", root)
	if err != nil {
		return &Problem{Source: src, Line: line, Err: err}
	}
	c.raw = raw
	c.List = list
	c.Objects = located(objs, c, doc, source, line)
	return nil
}

// located sets where each object of a document is: from its node, or the
// document's first content line when there is none.
func located(objs []Document, c *Chunk, doc []byte, source string, line int) []Document {
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
	return objs
}

// Locate parses a document read without positions (Stream.SkipPositions)
// for them: its objects' lines and columns, and Locate.
func (p *Piece) Locate() {
	c := p.Chunk
	if c.raw == nil || len(c.Objects) == 0 || c.Objects[0].text != nil {
		return
	}
	root := parseNode(p.Text)
	if root == nil {
		return
	}
	objs, _, err := split(c.raw, fmt.Sprintf("%s#%d", p.Source, c.N), "", root)
	if err != nil {
		return
	}
	c.Objects = located(objs, c, p.Text, p.Source, c.Line+leadingLines(p.Text))
}

// Render returns the document's text with the patches applied, to be
// written back between Before and the next Piece: Text itself when none
// apply to it. A changed document keeps its comments, key order, quoting
// and blank lines: the added fields are written into the text at the end
// of the mapping that holds them, in the document's own indentation. The
// result is checked against the JSON patch applied the API server's way;
// in the rare case the text cannot take the addition as it is (a field
// replaced rather than added, a block scalar that keeps trailing blank
// lines) the document is re-encoded from its parsed YAML (comments and
// order kept, blank lines lost; spliced is false), and failing that
// written from the patched JSON. Documents written as JSON stay JSON, in
// their key order and indentation.
func (p *Piece) Render(patches Patches) (text []byte, spliced bool, err error) {
	ops := p.Chunk.ops(patches)
	if len(ops) == 0 && !p.Chunk.JSON {
		return p.Text, true, nil
	}
	text, spliced, err = p.Chunk.render(p.Text, ops)
	if err != nil {
		return nil, false, fmt.Errorf("%s#%d: %w", p.Source, p.Chunk.N, err)
	}
	return text, spliced, nil
}

// PatchedJSON returns the document as JSON with the patches applied (a
// List stays one List), or nil for a document without one.
func (p *Piece) PatchedJSON(patches Patches) ([]byte, error) {
	c := p.Chunk
	if c.raw == nil {
		return nil, nil
	}
	ops := c.ops(patches)
	if len(ops) == 0 {
		return c.raw, nil
	}
	b, err := ApplyPatch(c.raw, ops)
	if err != nil {
		return nil, fmt.Errorf("%s#%d: applying graceguard's patch: %w", p.Source, c.N, err)
	}
	return b, nil
}

// HasJSON reports whether the document reads as a JSON value (PatchedJSON
// returns one).
func (p *Piece) HasJSON() bool { return p.Chunk.raw != nil }

// placesDepth is how deep Detach keeps the places of an object's fields:
// a Namespace's metadata.labels[KEY] and metadata.annotations[KEY], which
// findings about the namespace name.
const placesDepth = 3

// place is where a field's key is: line and column from 1.
type place struct{ line, column int }

// Detach returns the document without its text, which is its document's
// (a whole List's for an item), keeping instead the places of its fields
// up to three deep: Locate answers as before for a path of up to three
// parts, such as a Namespace's metadata.annotations[graceguard.io/max-work],
// and with the nearest of its first three parts for a longer one. A
// caller keeps a detached document for as long as it likes at the cost of
// the object, not of its document.
func (d Document) Detach() Document {
	n := objectNode(parsed(d.text), d.Pointer)
	d.text = nil
	d.places = map[string]place{}
	if n != nil {
		collectPlaces(n, "", 1, d.places)
	}
	return d
}

// collectPlaces records the place of each field under n, keyed by its
// path's tokens joined by "\x00".
func collectPlaces(n *kyaml.Node, prefix string, depth int, out map[string]place) {
	if depth > placesDepth {
		return
	}
	add := func(tok string, at, next *kyaml.Node) {
		key := prefix + tok
		out[key] = place{at.Line, at.Column}
		collectPlaces(next, key+"\x00", depth+1, out)
	}
	switch n.Kind {
	case kyaml.MappingNode:
		// The last of duplicate keys wins, as in Locate.
		for i := 0; i+1 < len(n.Content); i += 2 {
			add(n.Content[i].Value, n.Content[i], n.Content[i+1])
		}
	case kyaml.SequenceNode:
		for i, c := range n.Content {
			add(strconv.Itoa(i), c, c)
		}
	}
}

// locatePlaces is Locate for a detached document.
func (d Document) locatePlaces(path string) (line, column int) {
	key := ""
	for i, tok := range fieldTokens(path) {
		if i >= placesDepth {
			break
		}
		if i > 0 {
			key += "\x00"
		}
		key += tok
		p, ok := d.places[key]
		if !ok {
			break
		}
		line, column = p.line, p.column
	}
	if line == 0 {
		return d.Line, d.Column
	}
	return d.lineOffset + line, column
}
