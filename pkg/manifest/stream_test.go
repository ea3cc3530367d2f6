package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// streamSeeds are the fixtures and the edge cases of splitting: headers,
// end markers, empty documents, CRLF, JSON, a last line without newline.
func streamSeeds(tb testing.TB) []string {
	seeds := []string{
		"",
		"---\n",
		"---",
		"# only a comment\n",
		"# Copyright\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n...\n# after the marker\n---\n---\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}",
		"...\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n--- # two\n{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"b\"}}\n",
		strings.ReplaceAll("# windows\r\n---\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: a\r\n---\r\n", "\n", "\n"),
		"a: [\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n--- apiVersion: v1\n",
	}
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	return seeds
}

// FuzzStream holds the Stream to the splitting it replaced, which read a
// whole text at once (wholeSplit, below): the same documents at the same
// offsets and lines, the same error, whatever the reads it is given
// (one byte at a time included), and written back, Before, Text and Tail
// are the stream byte for byte.
func FuzzStream(f *testing.F) {
	for _, s := range streamSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want, wantErr := wholeSplit([]byte(in))
		for name, r := range map[string]io.Reader{
			"whole":    strings.NewReader(in),
			"one byte": iotest.OneByteReader(strings.NewReader(in)),
		} {
			s := NewStream(r, "f")
			var got []span
			var back bytes.Buffer
			var err error
			for {
				var p *Piece
				if p, err = s.Next(); err != nil {
					break
				}
				got = append(got, span{p.Chunk.Start, p.Chunk.End, p.Chunk.Line})
				if !bytes.Equal(p.Text, []byte(in[p.Chunk.Start:p.Chunk.End])) {
					t.Fatalf("%s: document %d is %q, at its offsets the text is %q", name, p.Chunk.N, p.Text, in[p.Chunk.Start:p.Chunk.End])
				}
				back.Write(p.Before)
				back.Write(p.Text)
			}
			if wantErr != nil {
				if err == nil || !strings.HasSuffix(err.Error(), wantErr.Error()) {
					t.Fatalf("%s: error %v, want one ending in %v", name, err, wantErr)
				}
				continue
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Fatalf("%s: documents %v, want %v", name, got, want)
			}
			back.Write(s.Tail())
			if back.String() != in {
				t.Fatalf("%s: written back the stream is\n%q\nwant\n%q", name, back.String(), in)
			}
		}
	})
}

// wholeSplit is the splitting Stream replaced, as it was, kept as the
// oracle: it found the documents of a whole text the way kubectl's reader
// does.
func wholeSplit(text []byte) ([]span, error) {
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
	kept := out[:0]
	for i, s := range out {
		if i == 0 && len(out) > 1 && len(bytes.TrimSpace(stripComments(text[s.start:s.end]))) == 0 {
			continue
		}
		s.end = s.start + documentEnd(text[s.start:s.end])
		if s.start < s.end {
			kept = append(kept, s)
		}
	}
	return kept, nil
}

// Read document by document, a stream's objects are the ones ReadFile
// finds, where it finds them; read without positions, they are the same
// objects, placed once Locate parses them.
func TestStreamReadsWhatReadFileReads(t *testing.T) {
	for _, in := range streamSeeds(t) {
		f, err := ReadFile(strings.NewReader(in), "f")
		if err != nil {
			continue
		}
		for _, skip := range []bool{false, true} {
			s := NewStream(strings.NewReader(in), "f")
			s.SkipPositions = skip
			var got []Document
			for {
				p, err := s.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if skip {
					p.Locate()
				}
				got = append(got, p.Chunk.Objects...)
			}
			want := f.Documents()
			if len(got) != len(want) {
				t.Fatalf("skip positions %v: %d objects, want %d", skip, len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Source != w.Source || g.Line != w.Line || g.Column != w.Column || !bytes.Equal(g.Raw, w.Raw) || !bytes.Equal(g.text, w.text) {
					t.Errorf("skip positions %v: object %d is %s at %d:%d, want %s at %d:%d", skip, i, g.Source, g.Line, g.Column, w.Source, w.Line, w.Column)
				}
			}
		}
	}
}

// A detached document locates the fields of a Namespace's metadata as the
// text does, without the text: for an item of a List, the whole List's.
func TestDetachLocatesAsTheTextDoes(t *testing.T) {
	in := `apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web}
  spec: {}
- apiVersion: v1
  kind: Namespace
  metadata:
    name: shop
    labels:
      graceguard.io/inject: enabled
    annotations:
      # the work term of every Pod in it
      graceguard.io/max-work: banana
  spec:
    finalizers: [kubernetes]
`
	f, err := ReadFile(strings.NewReader(in), "ns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := f.Documents()[1]
	det := d.Detach()
	if det.text != nil {
		t.Fatal("a detached document keeps its text")
	}
	for _, path := range []string{
		"metadata.annotations[graceguard.io/max-work]",
		"metadata.labels[graceguard.io/inject]",
		"metadata.labels[graceguard.io/mode]",
		"metadata.annotations",
		"metadata",
		"spec.finalizers[0]",
		"status.phase",
		"",
	} {
		wl, wc := d.Locate(path)
		gl, gc := det.Locate(path)
		if gl != wl || gc != wc {
			t.Errorf("%q: detached %d:%d, with the text %d:%d", path, gl, gc, wl, wc)
		}
	}
	if l, c := det.Locate("metadata.annotations[graceguard.io/max-work]"); l != 16 || c != 7 {
		t.Errorf("max-work at %d:%d, want 16:7", l, c)
	}
}
