package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// The tests read files whole (ReadFile) and write them back whole: the
// plugin does the same document by document (Piece.Render).

// Render writes the file back as YAML with the patches applied, each
// document as Piece.Render writes it and the text between them as it is.
func (f *File) Render(patches Patches) ([]byte, error) {
	var out bytes.Buffer
	prev := 0
	for _, c := range f.Chunks {
		ops := c.ops(patches)
		if len(ops) == 0 && !c.JSON {
			continue
		}
		out.Write(f.Text[prev:c.Start])
		doc, spliced, err := c.render(f.Text[c.Start:c.End], ops)
		if err != nil {
			return nil, fmt.Errorf("%s#%d: %w", f.Source, c.N, err)
		}
		if !spliced && !c.JSON {
			f.fallbacks++
		}
		out.Write(doc)
		prev = c.End
	}
	out.Write(f.Text[prev:])
	return out.Bytes(), nil
}

// PatchedJSON returns each non-empty document as JSON with the patches
// applied; a List stays one List.
func (f *File) PatchedJSON(patches Patches) ([][]byte, error) {
	var out [][]byte
	for _, c := range f.Chunks {
		p := &Piece{Source: f.Source, Chunk: c}
		b, err := p.PatchedJSON(patches)
		if err != nil {
			return nil, err
		}
		if b != nil {
			out = append(out, b)
		}
	}
	return out, nil
}

// span is a document's place in a file.
type span struct{ start, end, line int }

// splitDocuments finds the documents of a whole text as Stream does.
func splitDocuments(text []byte) ([]span, error) {
	var out []span
	s := NewStream(bytes.NewReader(text), "")
	for {
		p, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, span{p.Chunk.Start, p.Chunk.End, p.Chunk.Line})
	}
}
