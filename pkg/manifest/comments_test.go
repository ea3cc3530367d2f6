package manifest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestCommentsKeepTheirBlock holds Render to what a reader of the YAML
// expects of a commented-out line: uncommented after `mutate`, it means
// what it meant before. For every place a block ends in the fixtures, a
// commented-out key is put after the block's last line, and, where a
// sequence ends, a commented-out entry; each variant is mutated, the
// comment uncommented in the input and in the output, and the fields it
// adds must be the same, at the same paths, and the output must still
// read.
func TestCommentsKeepTheirBlock(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	variants := 0
	for _, in := range inputs {
		text := string(readTestFile(t, in).Text)
		for _, v := range commentedVariants(text) {
			if checkComment(t, in, text, v) {
				variants++
			}
		}
	}
	// Enough to mean something: every fixture has many block ends.
	if variants < 100 {
		t.Fatalf("only %d commented variants checked", variants)
	}
	t.Logf("%d commented-out lines checked", variants)
}

// variant is a fixture with one commented-out line inserted after line
// after (0-based).
type variant struct {
	after   int
	comment string
}

// commentedVariants lists, for each block end of the text (a content line
// followed by a less indented one), a commented-out key at that line's
// mapping column and, where a sequence entry ends there, a commented-out
// entry at the sequence's column.
func commentedVariants(text string) []variant {
	lines := strings.SplitAfter(text, "\n")
	content := func(i int) bool { return !blankOrComment(lines[i]) && !strings.HasPrefix(lines[i], "---") }
	col := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	var out []variant
	for i := range lines {
		if !content(i) {
			continue
		}
		next := -1
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], "---") {
				break
			}
			if content(j) {
				next = j
				break
			}
		}
		keyCol := col(lines[i])
		if strings.HasPrefix(strings.TrimLeft(lines[i], " "), "- ") {
			keyCol += 2
		}
		if next >= 0 && col(lines[next]) >= keyCol {
			continue
		}
		out = append(out, variant{i, fmt.Sprintf("%s# zz%d: x", strings.Repeat(" ", keyCol), i)})
		// The sequence entry line i ends, if it is the sequence's last:
		// the nearest line above at a lesser column starts the entry.
		for k := i; k >= 0; k-- {
			if !content(k) || col(lines[k]) >= keyCol {
				continue
			}
			c := col(lines[k])
			dash := strings.HasPrefix(strings.TrimLeft(lines[k], " "), "- ")
			if dash && (next < 0 || col(lines[next]) < c || col(lines[next]) == c && !strings.HasPrefix(strings.TrimLeft(lines[next], " "), "- ")) {
				out = append(out, variant{i, fmt.Sprintf("%s# - zz%d: x", strings.Repeat(" ", c), i)})
			}
			break
		}
	}
	return out
}

// checkComment checks one variant; it reports false when the variant says
// nothing (the comment is not a comment there, or uncommented it is not
// valid YAML in the input).
func checkComment(t *testing.T, in, text string, v variant) bool {
	t.Helper()
	lines := strings.SplitAfter(text, "\n")
	nl := "\n"
	if strings.HasSuffix(lines[v.after], "\r\n") {
		nl = "\r\n"
	}
	if !strings.HasSuffix(lines[v.after], "\n") {
		return false
	}
	with := strings.Join(lines[:v.after+1], "") + v.comment + nl + strings.Join(lines[v.after+1:], "")
	base, ok := leafPaths(text)
	if !ok {
		return false
	}
	// Inside a block scalar the "comment" is text: no variant.
	if p, ok := leafPaths(with); !ok || !sameSet(p, base) {
		return false
	}
	added, ok := uncommentedAdds(with, v.comment)
	if !ok || len(added) == 0 {
		return false
	}

	f, err := ReadFile(strings.NewReader(with), in)
	if err != nil {
		return false
	}
	p, _ := mutateAll(t, f)
	out, err := f.Render(p)
	if err != nil {
		t.Fatalf("%s, %q after line %d: %v", in, v.comment, v.after+1, err)
	}
	got, ok := uncommentedAdds(string(out), v.comment)
	if !ok {
		t.Errorf("%s: %q after line %d: uncommented after mutate, the output no longer reads:\n%s", in, v.comment, v.after+1, out)
		return true
	}
	if !sameSet(got, added) {
		t.Errorf("%s: %q after line %d: uncommented it adds %v before mutate, %v after:\n%s", in, v.comment, v.after+1, added, got, out)
	}
	return true
}

// uncommentedAdds uncomments the line comment in text (which must hold it
// once) and returns the leaf paths that adds.
func uncommentedAdds(text, comment string) (map[string]bool, bool) {
	if strings.Count(text, comment) != 1 {
		return nil, false
	}
	before, ok := leafPaths(text)
	if !ok {
		return nil, false
	}
	after, ok := leafPaths(strings.Replace(text, comment, strings.Replace(comment, "# ", "", 1), 1))
	if !ok {
		return nil, false
	}
	added := map[string]bool{}
	for p := range after {
		if !before[p] {
			added[p] = true
		}
	}
	return added, true
}

// leafPaths reads a stream as ReadFile does and lists every leaf's path,
// prefixed with its document's number.
func leafPaths(text string) (map[string]bool, bool) {
	f, err := ReadFile(strings.NewReader(text), "comments")
	if err != nil {
		return nil, false
	}
	paths := map[string]bool{}
	for n, c := range f.Chunks {
		if c.raw == nil {
			continue
		}
		var v any
		if json.Unmarshal(c.raw, &v) != nil {
			return nil, false
		}
		walkLeaves(fmt.Sprintf("#%d", n), v, paths)
	}
	return paths, true
}

func walkLeaves(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkLeaves(prefix+"/"+k, v[k], out)
		}
	case []any:
		for i, e := range v {
			walkLeaves(fmt.Sprintf("%s/%d", prefix, i), e, out)
		}
	default:
		out[fmt.Sprintf("%s=%v", prefix, v)] = true
	}
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// commentKey stands for a comment's text in commentHomes: no manifest has
// a key of this name.
const commentKey = "zz-graceguard-comment"

// commentHomes says, for each comment line of a stream (the n-th comment
// line of the text at index n), which block it belongs to by its
// indentation: the path the comment's text would have if it were
// uncommented (the "#" and one space removed), found by putting a key of
// that shape in its place and reading the document as kubectl does; a
// commented-out sequence entry ("# - name: B") as an entry. The path is
// "" where the comment says nothing (empty, in a block scalar, or its
// place does not read with a key there). Graceguard adds no comments, so
// the n-th comment of its output is the n-th of its input.
func commentHomes(text string) []string {
	lines := strings.SplitAfter(text, "\n")
	spans, err := splitDocuments([]byte(text))
	if err != nil {
		return nil
	}
	// Line offsets, to find each line's document.
	offsets := make([]int, len(lines)+1)
	for i, l := range lines {
		offsets[i+1] = offsets[i] + len(l)
	}
	var out []string
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if !strings.HasPrefix(t, "#") {
			continue
		}
		out = append(out, "")
		body := strings.TrimPrefix(strings.TrimPrefix(strings.TrimRight(t, "\r\n"), "#"), " ")
		words := strings.TrimLeft(body, " ")
		if words == "" {
			continue
		}
		col := len(l) - len(t) + len(body) - len(words)
		key := commentKey + ": x"
		if words == "-" || strings.HasPrefix(words, "- ") {
			key = "- " + key
		}
		doc := -1
		for n, s := range spans {
			if offsets[i] >= s.start && offsets[i] < s.end {
				doc = n
			}
		}
		if doc < 0 {
			continue
		}
		s := spans[doc]
		nl := strings.TrimPrefix(l, strings.TrimRight(l, "\r\n"))
		with := text[s.start:offsets[i]] + strings.Repeat(" ", col) + key + nl + text[offsets[i+1]:s.end]
		raw, err := toJSON([]byte(with))
		if err != nil {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		if p := keyPath(v, commentKey); p != "" {
			out[len(out)-1] = fmt.Sprintf("#%d%s", doc+1, p)
		}
	}
	return out
}

// keyPath returns the JSON pointer of the mapping that holds key, or "".
func keyPath(v any, key string) string {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v[key]; ok {
			return "/"
		}
		for k, e := range v {
			if p := keyPath(e, key); p != "" {
				return "/" + k + strings.TrimSuffix(p, "/") + "/"
			}
		}
	case []any:
		for i, e := range v {
			if p := keyPath(e, key); p != "" {
				return fmt.Sprintf("/%d%s", i, strings.TrimSuffix(p, "/")) + "/"
			}
		}
	}
	return ""
}

// checkCommentHomes fails when a comment of in belongs, by its
// indentation, to another block in out than in in.
func checkCommentHomes(t *testing.T, name, in, out string) {
	t.Helper()
	before, after := commentHomes(in), commentHomes(out)
	if len(before) != len(after) {
		t.Fatalf("%s: %d comment lines before mutate, %d after:\n%s", name, len(before), len(after), out)
	}
	comments := commentLines(in)
	for i := range before {
		if before[i] != "" && before[i] != after[i] {
			t.Errorf("%s: comment %q belongs to %s before mutate, to %s after:\n%s", name, strings.TrimSpace(comments[i]), before[i], after[i], out)
		}
	}
}

func commentLines(text string) []string {
	var out []string
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestEveryCommentKeepsItsBlock holds every comment of the fixtures, and
// of the fixtures with a commented-out line at each block end, to its
// block: read by its indentation as if uncommented, it belongs to the
// same mapping or sequence after `mutate` as before, prose included.
func TestEveryCommentKeepsItsBlock(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	homed := 0
	for _, in := range inputs {
		text := string(readTestFile(t, in).Text)
		texts := []string{text}
		lines := strings.SplitAfter(text, "\n")
		for _, v := range commentedVariants(text) {
			if strings.HasSuffix(lines[v.after], "\n") {
				texts = append(texts, strings.Join(lines[:v.after+1], "")+v.comment+"\n"+strings.Join(lines[v.after+1:], ""))
			}
		}
		for _, text := range texts {
			f, err := ReadFile(strings.NewReader(text), in)
			if err != nil {
				continue
			}
			p, _ := mutateAll(t, f)
			out, err := f.Render(p)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			checkCommentHomes(t, in, text, string(out))
			for _, h := range commentHomes(text) {
				if h != "" {
					homed++
				}
			}
		}
	}
	if homed < 1000 {
		t.Fatalf("only %d comments with a home checked", homed)
	}
	t.Logf("%d comments checked", homed)
}
