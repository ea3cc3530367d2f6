package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// Patches gives the JSON patch graceguard makes to a document of a File
// (nil for none), with pointers relative to the object.
type Patches func(Document) []mutate.Operation

// ops gathers the chunk's patches, with pointers from the document's root.
func (c *Chunk) ops(patches Patches) []mutate.Operation {
	var ops []mutate.Operation
	for _, d := range c.Objects {
		for _, op := range patches(d) {
			op.Path = d.Pointer + op.Path
			ops = append(ops, op)
		}
	}
	return ops
}

// render returns the document's text with ops applied (see Piece.Render),
// and whether it was spliced into the text as it was.
func (c *Chunk) render(doc []byte, ops []mutate.Operation) ([]byte, bool, error) {
	want, err := ApplyPatch(c.raw, ops)
	if err != nil {
		return nil, false, fmt.Errorf("applying graceguard's patch: %w", err)
	}
	if !c.JSON {
		if got, err := splice(doc, ops); err == nil && sameJSON(got, want) {
			return got, true, nil
		}
		if got, err := reencode(doc, ops); err == nil && sameJSON(got, want) {
			return got, false, nil
		}
	}
	var y []byte
	if c.JSON {
		// JSON stays JSON, in the document's key order and indentation.
		y = jsonLike(doc, want)
	} else if y, err = yaml.JSONToYAML(want); err != nil {
		return nil, false, err
	}
	// Keep what surrounded the document: the text before its first and
	// after its last content line (comments, blank lines).
	head, tail := surrounding(doc)
	return append(append([]byte(head), y...), tail...), false, nil
}

// jsonLike writes the JSON want as doc is written: on one line when doc's
// content is one line, else indented by doc's first indented line (two
// spaces when none is), with a final newline when doc has one.
func jsonLike(doc, want []byte) []byte {
	head, tail := surrounding(doc)
	body := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(string(doc), head), tail))
	var out bytes.Buffer
	if !strings.Contains(body, "\n") {
		out.Write(want)
	} else {
		indent := "  "
		for _, l := range strings.Split(body, "\n")[1:] {
			if t := strings.TrimLeft(l, " \t"); t != l && t != "" {
				indent = l[:len(l)-len(t)]
				break
			}
		}
		if json.Indent(&out, want, "", indent) != nil {
			out.Reset()
			out.Write(want)
		}
	}
	out.WriteString("\n")
	return out.Bytes()
}

// sameJSON reports whether a YAML document reads, the way kubectl reads it,
// as the JSON want.
func sameJSON(doc, want []byte) bool {
	got, err := toJSON(doc)
	if err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// surrounding returns the comment and blank lines before a document's
// first content line and after its last.
func surrounding(doc []byte) (head, tail string) {
	lines := strings.SplitAfter(string(doc), "\n")
	first, last := -1, -1
	for i, l := range lines {
		if !blankOrComment(l) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return string(doc), ""
	}
	return strings.Join(lines[:first], ""), strings.Join(lines[last+1:], "")
}

// ownedAbove tells whether a comment line after a block mapping's last
// content belongs to the block above rather than to what follows, judged
// by the column its text would have uncommented ("# " removed): deeper
// than the mapping's keys (at column indent), such as a commented-out
// label or the rest of a commented-out entry, or at their column as a
// sequence entry ("- name: B" in a sequence written without indent).
func ownedAbove(line string, indent int) bool {
	t := strings.TrimLeft(line, " ")
	if !strings.HasPrefix(t, "#") {
		return false
	}
	body := strings.TrimPrefix(strings.TrimPrefix(t, "#"), " ")
	text := strings.TrimLeft(body, " ")
	if text == "" {
		return false
	}
	col := len(line) - len(t) + len(body) - len(text)
	return col > indent || col == indent && (text == "-" || strings.HasPrefix(text, "- "))
}

func blankOrComment(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || t[0] == '#'
}

// splice writes each "add" into the text: a new key at the end of the
// mapping that holds it, block or flow, or a new value over a one-line
// scalar. It fails (errNotSpliced) on
// anything else, for the caller to fall back.
func splice(doc []byte, ops []mutate.Operation) ([]byte, error) {
	style := kyaml.DeriveSeqIndentStyle(string(doc))
	nl := "\n"
	if bytes.Contains(doc, []byte("\r\n")) {
		nl = "\r\n"
	}
	for len(ops) > 0 {
		op := ops[0]
		ops = ops[1:]
		root := parseNode(doc)
		if root == nil || op.Operation != "add" {
			return nil, errNotSpliced
		}
		parent, key, ok := resolveParent(root, op.Path)
		if !ok || parent.Kind != kyaml.MappingNode {
			return nil, errNotSpliced
		}
		value, err := valueNode(op.Value)
		if err != nil {
			return nil, err
		}
		if old := lookup(parent, key); old != nil {
			if old.Kind == kyaml.MappingNode {
				// "add" of a mapping over one it only extends (an empty
				// template's `metadata: {}` given its annotations): the
				// keys it adds, each where any other would go, so the
				// mapping keeps its style.
				more, err := extend(old, op)
				if err != nil {
					return nil, err
				}
				ops = append(more, ops...)
				continue
			}
			// "add" over a member replaces it: a raised grace period, a
			// stale budget annotation.
			if doc, err = replaceScalar(doc, old, value); err != nil {
				return nil, err
			}
			continue
		}
		entry := &kyaml.Node{Kind: kyaml.MappingNode, Content: []*kyaml.Node{{Kind: kyaml.ScalarNode, Tag: "!!str", Value: key}, value}}
		if parent.Style&kyaml.FlowStyle != 0 || len(parent.Content) == 0 {
			doc, err = insertFlow(doc, parent, entry)
		} else {
			doc, err = insertBlock(doc, root, parent, entry, style, nl)
		}
		if err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// extend turns op, an "add" of a mapping over the mapping old, into the
// operations that add what old lacks: a key old does not have, or, for a
// key whose values are both mappings, what that one lacks. It fails
// (errNotSpliced) when op would drop or change something old holds.
func extend(old *kyaml.Node, op mutate.Operation) ([]mutate.Operation, error) {
	var have any
	if err := old.Decode(&have); err != nil {
		return nil, errNotSpliced
	}
	var was, want map[string]any
	if !asJSON(have, &was) || !asJSON(op.Value, &want) {
		return nil, errNotSpliced
	}
	for k := range was {
		if _, ok := want[k]; !ok {
			return nil, errNotSpliced
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []mutate.Operation
	for _, k := range keys {
		path := op.Path + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
		v, ok := was[k]
		switch {
		case !ok:
		case reflect.DeepEqual(v, want[k]):
			continue
		default:
			_, oldMap := v.(map[string]any)
			_, newMap := want[k].(map[string]any)
			if !oldMap || !newMap {
				return nil, errNotSpliced
			}
		}
		out = append(out, mutate.Operation{Operation: "add", Path: path, Value: want[k]})
	}
	return out, nil
}

// asJSON reads v as JSON reads it into out.
func asJSON(v any, out any) bool {
	b, err := json.Marshal(v)
	return err == nil && json.Unmarshal(b, out) == nil
}

// insertBlock adds entry as the last key of a block mapping: after the
// mapping's last content line, before any blank or comment lines that
// follow it (they belong to what comes next).
func insertBlock(doc []byte, root, parent, entry *kyaml.Node, style, nl string) ([]byte, error) {
	first := parent.Content[0]
	lines := strings.SplitAfter(string(doc), "\n")
	if first.Line < 1 || first.Line > len(lines) {
		return nil, errNotSpliced
	}
	// The keys' column, counted in characters as yaml.v3 does; only
	// spaces may indent a block mapping.
	indent := first.Column - 1
	prefix := []rune(lines[first.Line-1])
	if indent > len(prefix) {
		return nil, errNotSpliced
	}
	pad := strings.Repeat(" ", indent)

	// The next node after the mapping in document order starts on a line
	// after the mapping's last one.
	nodes := preorder(root, nil)
	end := -1
	for i, n := range nodes {
		if n == parent {
			end = i + subtreeSize(parent) - 1
			break
		}
	}
	if end < 0 {
		return nil, errNotSpliced
	}
	at := len(lines)
	if end+1 < len(nodes) {
		at = nodes[end+1].Line - 1
	}
	// Comments and blank lines between the mapping's last content line and
	// the next node belong to what comes next, except comments that belong
	// to the block above by their indentation: deeper than the mapping's
	// keys (a commented-out label), or at its column as a list entry (a
	// commented-out "- name: B" in a sequence written without indent).
	// The new key goes after those, so uncommenting them still means what
	// it meant.
	stop := at
	for at > 0 && blankOrComment(lines[at-1]) {
		at--
	}
	for i := stop; i > at; i-- {
		if ownedAbove(lines[i-1], indent) {
			at = i
			break
		}
	}
	if at == 0 {
		return nil, errNotSpliced
	}
	if !strings.HasSuffix(lines[at-1], "\n") {
		lines[at-1] += nl
	}

	text, err := encode(entry, style)
	if err != nil {
		return nil, err
	}
	var add strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n") {
		add.WriteString(pad + strings.TrimSuffix(l, "\n") + nl)
	}
	out := strings.Join(lines[:at], "") + add.String() + strings.Join(lines[at:], "")
	return []byte(out), nil
}

// insertFlow adds entry as the last key of a flow mapping ({} included),
// before its closing brace.
func insertFlow(doc []byte, parent, entry *kyaml.Node) ([]byte, error) {
	open, ok := offsetOf(doc, parent.Line, parent.Column)
	if !ok || doc[open] != '{' {
		return nil, errNotSpliced
	}
	closing, ok := closingBrace(doc, open)
	if !ok {
		return nil, errNotSpliced
	}
	setStyle(entry, kyaml.FlowStyle)
	text, err := encode(entry, string(kyaml.CompactSequenceStyle))
	if err != nil {
		return nil, err
	}
	inner := strings.TrimSpace(text)
	if !strings.HasPrefix(inner, "{") || !strings.HasSuffix(inner, "}") || strings.Contains(inner, "\n") {
		return nil, errNotSpliced
	}
	inner = inner[1 : len(inner)-1]
	// After the last entry, keeping any space before the brace.
	at := closing
	for at > open+1 && (doc[at-1] == ' ' || doc[at-1] == '\t') {
		at--
	}
	if len(parent.Content) > 0 {
		inner = ", " + inner
	}
	out := append(append(append([]byte{}, doc[:at]...), inner...), doc[at:]...)
	return out, nil
}

// closingBrace finds the brace that closes the flow mapping opened at
// open. Inside a flow collection a plain scalar cannot hold brackets or
// commas, so only quoted scalars and comments need skipping.
func closingBrace(doc []byte, open int) (int, bool) {
	depth := 0
	for i := open; i < len(doc); i++ {
		switch c := doc[i]; c {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i, c == '}'
			}
		case '"':
			for i++; i < len(doc) && doc[i] != '"'; i++ {
				if doc[i] == '\\' {
					i++
				}
			}
		case '\'':
			for i++; i < len(doc); i++ {
				if doc[i] == '\'' {
					if i+1 < len(doc) && doc[i+1] == '\'' {
						i++
						continue
					}
					break
				}
			}
		case '#':
			if i > 0 && (doc[i-1] == ' ' || doc[i-1] == '\t' || doc[i-1] == '\n') {
				for i < len(doc) && doc[i] != '\n' {
					i++
				}
			}
		}
	}
	return 0, false
}

// replaceScalar writes value over a scalar written on one line.
func replaceScalar(doc []byte, old, value *kyaml.Node) ([]byte, error) {
	if old.Kind != kyaml.ScalarNode || value.Kind != kyaml.ScalarNode || old.Value == "" {
		return nil, errNotSpliced
	}
	start, ok := offsetOf(doc, old.Line, old.Column)
	if !ok {
		return nil, errNotSpliced
	}
	end, ok := scalarEnd(doc, start, old)
	if !ok {
		return nil, errNotSpliced
	}
	text, err := encode(value, string(kyaml.CompactSequenceStyle))
	if err != nil {
		return nil, err
	}
	text = strings.TrimSuffix(text, "\n")
	if strings.Contains(text, "\n") {
		return nil, errNotSpliced
	}
	return append(append(append([]byte{}, doc[:start]...), text...), doc[end:]...), nil
}

// scalarEnd finds where a one-line scalar that starts at start ends.
func scalarEnd(doc []byte, start int, n *kyaml.Node) (int, bool) {
	line := doc[start:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	switch n.Style {
	case 0:
		if !bytes.HasPrefix(line, []byte(n.Value)) {
			return 0, false
		}
		return start + len(n.Value), true
	case kyaml.DoubleQuotedStyle:
		for i := 1; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '"':
				return start + i + 1, true
			}
		}
	case kyaml.SingleQuotedStyle:
		for i := 1; i < len(line); i++ {
			if line[i] == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					i++
					continue
				}
				return start + i + 1, true
			}
		}
	}
	return 0, false
}

// offsetOf converts a yaml.v3 position (line and character column, from 1)
// to a byte offset.
func offsetOf(doc []byte, line, column int) (int, bool) {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(doc[off:], '\n')
		if i < 0 {
			return 0, false
		}
		off += i + 1
	}
	for c := 1; c < column; c++ {
		if off >= len(doc) || doc[off] == '\n' {
			return 0, false
		}
		_, w := utf8.DecodeRune(doc[off:])
		off += w
	}
	return off, off < len(doc)
}

// reencode applies ops to the parsed document and encodes it again:
// comments and key order survive, blank lines do not.
func reencode(doc []byte, ops []mutate.Operation) ([]byte, error) {
	var n kyaml.Node
	if err := kyaml.Unmarshal(doc, &n); err != nil || len(n.Content) == 0 {
		return nil, errNotSpliced
	}
	for _, op := range ops {
		parent, key, ok := resolveParent(n.Content[0], op.Path)
		if !ok || parent.Kind != kyaml.MappingNode || op.Operation != "add" {
			return nil, errNotSpliced
		}
		value, err := valueNode(op.Value)
		if err != nil {
			return nil, err
		}
		if parent.Style&kyaml.FlowStyle != 0 {
			setStyle(value, kyaml.FlowStyle)
		}
		if i := keyIndex(parent, key); i >= 0 {
			parent.Content[i+1] = value
		} else {
			parent.Content = append(parent.Content, &kyaml.Node{Kind: kyaml.ScalarNode, Tag: "!!str", Value: key}, value)
		}
	}
	text, err := encode(&n, kyaml.DeriveSeqIndentStyle(string(doc)))
	if err != nil {
		return nil, err
	}
	return []byte(text), nil
}

func keyIndex(m *kyaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// resolveParent walks a JSON pointer to the node that holds its last token.
func resolveParent(root *kyaml.Node, pointer string) (*kyaml.Node, string, bool) {
	if !strings.HasPrefix(pointer, "/") {
		return nil, "", false
	}
	toks := strings.Split(pointer[1:], "/")
	for i, t := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	n := root
	for _, t := range toks[:len(toks)-1] {
		switch n.Kind {
		case kyaml.MappingNode:
			n = lookup(n, t)
		case kyaml.SequenceNode:
			i := -1
			fmt.Sscanf(t, "%d", &i)
			if i < 0 || i >= len(n.Content) {
				return nil, "", false
			}
			n = n.Content[i]
		default:
			return nil, "", false
		}
		if n == nil {
			return nil, "", false
		}
	}
	return n, toks[len(toks)-1], true
}

// valueNode turns a patch value into a YAML node with no style of its
// own, so the encoder writes it the way a person would.
func valueNode(v any) (*kyaml.Node, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n kyaml.Node
	if err := kyaml.Unmarshal(b, &n); err != nil || len(n.Content) != 1 {
		return nil, fmt.Errorf("encoding %s: %v", b, err)
	}
	setStyle(n.Content[0], 0)
	return n.Content[0], nil
}

func setStyle(n *kyaml.Node, s kyaml.Style) {
	if n.Kind != kyaml.ScalarNode {
		n.Style = s
	} else if s == 0 {
		n.Style = 0
	}
	for _, c := range n.Content {
		setStyle(c, s)
	}
}

// encode writes a node as YAML, two-space indented, with the document's
// sequence indentation style.
func encode(n *kyaml.Node, seqStyle string) (string, error) {
	var buf bytes.Buffer
	e := kyaml.NewEncoderWithOptions(&buf, &kyaml.EncoderOptions{SeqIndent: kyaml.SequenceIndentStyle(seqStyle)})
	if err := e.Encode(n); err != nil {
		return "", err
	}
	if err := e.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// preorder lists a node and its descendants in document order.
func preorder(n *kyaml.Node, out []*kyaml.Node) []*kyaml.Node {
	out = append(out, n)
	for _, c := range n.Content {
		out = preorder(c, out)
	}
	return out
}

func subtreeSize(n *kyaml.Node) int {
	s := 1
	for _, c := range n.Content {
		s += subtreeSize(c)
	}
	return s
}
