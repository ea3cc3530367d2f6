package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// jsonReader reads one object's JSON (a review's Pod or workload, as sent)
// in one pass, keeping only what graceguard decides on and skipping
// everything else without materializing it. What it keeps is bounded by
// construction, whatever the object holds:
//
//   - every string it keeps is cut to a limit of its field (mutate.Clipped
//     says how long it was);
//   - every list it keeps is cut to a limit of its field (longer lists end
//     with mutate.ClippedList), or, where graceguard must see all of it
//     (containers, ports), it is counted past the limit and reported
//     (reader.unread: a finding, never a silent cut);
//   - labels and annotations keep only the keys graceguard reads
//     (mutate.Keys);
//   - everything kept is charged to a meter: a review keeps at most
//     MaxKeptBytes, and every byte past the first keptAllowance comes
//     out of the guard's in-flight budget.
//
// It reads the JSON the API server sends (encoding/json's output of the
// typed object: every name once, in its case) exactly as the API
// machinery does, for every field it keeps (FuzzReaderReadsLikeTheAPIMachinery);
// any other JSON it reads with bounded work and answers something.
type jsonReader struct {
	dec *jsontext.Decoder
	m   *meter
	// at is the path of the value being read, for messages.
	at []step
	// name is the scratch buffer of an escaped member name.
	name []byte
	// unread records what was counted but not kept.
	unread []unread
}

// step is one element of a path: a member name, or an index when name is
// nil. A name is the input's own bytes (or a copy, when it was escaped).
type step struct {
	name  []byte
	index int
}

// unread is a list longer than graceguard reads: where, how long, the limit.
type unread struct {
	path  string
	n     int
	limit int
	what  string
}

// readerOptions read JSON as the API machinery does for what graceguard
// keeps: a repeated name's last value, invalid UTF-8 replaced. Names are
// matched case-sensitively by the reader itself.
var readerOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

func newReader(raw []byte, m *meter) *jsonReader {
	return &jsonReader{dec: jsontext.NewDecoder(bytes.NewBuffer(raw), readerOptions), m: m, at: make([]step, 0, 16)}
}

// errKept is the error of an object that keeps more than MaxKeptBytes.
var errKept = errors.New("kept too much")

// path renders where the reader is: spec.containers[3].ports.
func (r *jsonReader) path() string {
	var b strings.Builder
	for _, s := range r.at {
		if s.name == nil {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(s.name)
	}
	return b.String()
}

// fail is a decoding error at the reader's path, bounded in length
// whatever the input (the path has at most the reader's depth of steps,
// each a field name of graceguard's or an index).
func (r *jsonReader) fail(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if p := r.path(); p != "" {
		msg = p + ": " + msg
	}
	return errors.New(msg)
}

// jsonKind names a JSON kind for messages.
func jsonKind(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "invalid JSON"
}

// wrap names the reader's path in a syntax error of the JSON itself.
func (r *jsonReader) wrap(err error) error {
	if err == nil {
		return nil
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		// Its message quotes a JSON pointer as deep as the input: keep the
		// reader's own (bounded) path and the offset instead.
		return r.fail("invalid JSON at byte %d: %v", se.ByteOffset, errors.Unwrap(se))
	}
	return r.fail("%v", err)
}

// object reads an object, calling member for each member with its
// unquoted name (valid only during the call); member must read or skip
// the value. null reads as no object: member is not called and present is
// false.
func (r *jsonReader) object(member func(name []byte) error) (present bool, err error) {
	switch k := r.dec.PeekKind(); k {
	case 'n':
		_, err := r.dec.ReadToken()
		return false, r.wrap(err)
	case '{':
	default:
		if err := r.dec.SkipValue(); err != nil {
			return false, r.wrap(err)
		}
		return false, r.fail("want an object, got %s", jsonKind(k))
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return false, r.wrap(err)
	}
	for r.dec.PeekKind() != '}' {
		v, err := r.dec.ReadValue()
		if err != nil {
			return false, r.wrap(err)
		}
		name := r.unquoteName(v)
		if name == nil {
			// A name graceguard reads is short and plain; this is neither.
			if err := r.dec.SkipValue(); err != nil {
				return false, r.wrap(err)
			}
			continue
		}
		at := name
		if len(v) != len(name)+2 {
			// Unquoted into the scratch buffer, which the next name reuses.
			at = append([]byte(nil), name...)
		}
		r.at = append(r.at, step{name: at})
		err = member(name)
		r.at = r.at[:len(r.at)-1]
		if err != nil {
			return false, err
		}
	}
	_, err = r.dec.ReadToken()
	return true, r.wrap(err)
}

// maxNameLength bounds the member names the reader matches: longer ones
// are skipped unread. The longest name graceguard reads is a key of
// mutate.Keys.
var maxNameLength = max(mutate.MaxKeyLength, 64)

// unquoteName returns a member name unquoted, or nil when it is longer
// than any name graceguard reads. Without escapes (what encoding/json
// writes for every field name) it is the input itself.
func (r *jsonReader) unquoteName(v jsontext.Value) []byte {
	if len(v) > 6*maxNameLength+2 {
		return nil
	}
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return v[1 : len(v)-1]
	}
	// The value is valid JSON: an error is invalid UTF-8, replaced as the
	// API machinery replaces it.
	r.name, _ = jsontext.AppendUnquote(r.name[:0], v)
	if len(r.name) > maxNameLength {
		return nil
	}
	return r.name
}

// array reads an array, calling elem for each element with its index; elem
// must read or skip the value. null reads as no array.
func (r *jsonReader) array(elem func(i int) error) (present bool, err error) {
	switch k := r.dec.PeekKind(); k {
	case 'n':
		_, err := r.dec.ReadToken()
		return false, r.wrap(err)
	case '[':
	default:
		if err := r.dec.SkipValue(); err != nil {
			return false, r.wrap(err)
		}
		return false, r.fail("want an array, got %s", jsonKind(k))
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return false, r.wrap(err)
	}
	for i := 0; r.dec.PeekKind() != ']'; i++ {
		r.at = append(r.at, step{index: i})
		err := elem(i)
		r.at = r.at[:len(r.at)-1]
		if err != nil {
			return false, err
		}
	}
	_, err = r.dec.ReadToken()
	return true, r.wrap(err)
}

func (r *jsonReader) skip() error { return r.wrap(r.dec.SkipValue()) }

// str reads a string of at most limit bytes kept (a longer one is kept
// Clipped); null reads as "".
func (r *jsonReader) str(limit int) (string, error) {
	v, err := r.dec.ReadValue()
	if err != nil {
		return "", r.wrap(err)
	}
	switch v.Kind() {
	case 'n':
		return "", nil
	case '"':
	default:
		return "", r.fail("want a string, got %s", jsonKind(v.Kind()))
	}
	s := readString(v, limit)
	if !r.m.charge(len(s)) {
		return "", errKept
	}
	return s, nil
}

// optStr reads a string into a pointer field: null reads as nil, as the
// API machinery reads it.
func (r *jsonReader) optStr(limit int) (*string, error) {
	if r.dec.PeekKind() == 'n' {
		return nil, r.skip()
	}
	s, err := r.str(limit)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// int64 reads an integer; null reads as nil.
func (r *jsonReader) int64() (*int64, error) {
	v, err := r.dec.ReadValue()
	if err != nil {
		return nil, r.wrap(err)
	}
	switch v.Kind() {
	case 'n':
		return nil, nil
	case '0':
	default:
		return nil, r.fail("want an integer, got %s", jsonKind(v.Kind()))
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		// As encoding/json: a fraction, an exponent or an overflow is no int64.
		return nil, r.fail("want an integer, got %s", clipJSON(v))
	}
	return &n, nil
}

// int32 reads an integer that fits 32 bits; null reads as 0.
func (r *jsonReader) int32() (int32, error) {
	n, err := r.int64()
	if err != nil || n == nil {
		return 0, err
	}
	if int64(int32(*n)) != *n {
		return 0, r.fail("want a 32-bit integer, got %d", *n)
	}
	return int32(*n), nil
}

// boolean reads true or false; null reads as nil.
func (r *jsonReader) boolean() (*bool, error) {
	v, err := r.dec.ReadValue()
	if err != nil {
		return nil, r.wrap(err)
	}
	switch v.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		b := v.Kind() == 't'
		return &b, nil
	}
	return nil, r.fail("want a boolean, got %s", jsonKind(v.Kind()))
}

// strs reads a list of strings, keeping the first keep of them, each of at
// most limit(i) bytes; a longer list ends with mutate.ClippedList. null
// reads as nil.
func (r *jsonReader) strs(keep int, limit func(i int) int) ([]string, error) {
	var out []string
	more, sum := 0, uint64(fnvOffset)
	present, err := r.array(func(i int) error {
		if i >= keep {
			v, err := r.dec.ReadValue()
			if err != nil {
				return r.wrap(err)
			}
			more, sum = more+1, fnv(sum, v)
			return nil
		}
		s, err := r.str(limit(i))
		if err != nil {
			return err
		}
		var ok bool
		if out, ok = grow(r.m, out); !ok {
			return errKept
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if more > 0 {
		out = append(out, mutate.ClippedList(more, sum))
	}
	if present && out == nil {
		// [] is not null, as the API machinery reads it.
		return []string{}, nil
	}
	return out, nil
}

// keyed reads labels or annotations: only the keys graceguard reads in
// where (mutate.Keys), each value kept to its key's limit. An object reads
// as a map even when no key is kept (graceguard then adds to it instead
// of writing a new one); null reads as nil.
func (r *jsonReader) keyed(where mutate.Where) (map[string]string, error) {
	var out map[string]string
	present, err := r.object(func(name []byte) error {
		k, ok := lookupKey(name, where)
		if !ok {
			return r.skip()
		}
		limit := k.MaxLength
		if where&(mutate.PodLabel|mutate.NamespaceLabel) != 0 {
			limit = mutate.MaxLabelValueLength
		}
		v, err := r.str(limit)
		if err != nil {
			return err
		}
		if out == nil {
			out = make(map[string]string, 4)
		}
		if !r.m.charge(len(k.Name) + 48) {
			return errKept
		}
		out[k.Name] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	if present && out == nil {
		out = map[string]string{}
	}
	return out, nil
}

// grow makes room for one more element in s, charging the meter for a new
// backing array when it needs one: what the lists' growth allocates, not
// only what they end up holding, is what the meter counts.
func grow[T any](m *meter, s []T) ([]T, bool) {
	if len(s) < cap(s) {
		return s, true
	}
	n := max(4, 2*cap(s))
	var zero T
	if !m.charge(n * int(unsafe.Sizeof(zero))) {
		return s, false
	}
	g := make([]T, len(s), n)
	copy(g, s)
	return g, true
}

// count notes a list longer than graceguard reads: n elements, of which
// limit were kept.
func (r *jsonReader) count(n, limit int, what string) {
	r.unread = append(r.unread, unread{path: r.path(), n: n, limit: limit, what: what})
}

// clipJSON quotes a JSON value for a message, at most 32 bytes of it.
func clipJSON(v jsontext.Value) string {
	if len(v) > 32 {
		return strconv.Quote(string(v[:29]) + "...")
	}
	return strconv.Quote(string(v))
}

// readString unquotes the JSON string v, keeping at most limit bytes: a
// string that fits is returned whole (as the API machinery reads it:
// escapes resolved, invalid UTF-8 replaced by U+FFFD); a longer one as
// mutate.Clipped of its first whole characters, its length and a hash of
// v. It allocates only what it keeps.
func readString(v jsontext.Value, limit int) string {
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		s := v[1 : len(v)-1]
		if len(s) <= limit {
			return string(s)
		}
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return mutate.Clipped(string(s[:cut]), len(s), fnv(fnvOffset, v))
	}
	if len(v) <= 6*limit+2 {
		// Escapes take up to 6 bytes per character: this one may fit.
		s, _ := jsontext.AppendUnquote(nil, v)
		if len(s) <= limit {
			return string(s)
		}
	}
	prefix, n := scanString(v, limit)
	return mutate.Clipped(prefix, n, fnv(fnvOffset, v))
}

// scanString reads the JSON string v (valid, quoted) without keeping it:
// the longest run of its first characters that fits in limit bytes, and
// its unquoted length, both as jsontext.AppendUnquote reads it (invalid
// UTF-8 and lone surrogates each become U+FFFD).
func scanString(v jsontext.Value, limit int) (string, int) {
	var prefix []byte
	full := false
	n := 0
	var buf [utf8.UTFMax]byte
	for i := 1; i < len(v)-1; {
		var unit []byte
		switch c := v[i]; {
		case c == '\\':
			r, size := escape(v[i:])
			unit = buf[:utf8.EncodeRune(buf[:], r)]
			i += size
		case c < utf8.RuneSelf:
			unit = v[i : i+1]
			i++
		default:
			r, size := utf8.DecodeRune(v[i:])
			if r == utf8.RuneError && size == 1 {
				unit = buf[:utf8.EncodeRune(buf[:], utf8.RuneError)]
			} else {
				unit = v[i : i+size]
			}
			i += size
		}
		n += len(unit)
		if !full && len(prefix)+len(unit) <= limit {
			prefix = append(prefix, unit...)
		} else {
			full = true
		}
	}
	return string(prefix), n
}

// escape decodes the escape sequence at the start of b (valid JSON):
// the character and the bytes it takes.
func escape(b []byte) (rune, int) {
	switch b[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(b[2:6])
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if d := utf16.DecodeRune(r, hex4(b[8:12])); d != utf8.RuneError {
				return d, 12
			}
		}
		return utf8.RuneError, 6
	}
	return rune(b[1]), 2
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return utf8.RuneError
		}
		r = r<<4 | rune(c)
	}
	return r
}

// lookupKey is mutate.LookupKey for a name in the input, without making a
// string of it: an object may have 100,000 annotations.
func lookupKey(name []byte, where mutate.Where) (mutate.Key, bool) {
	if len(name) > mutate.MaxKeyLength {
		return mutate.Key{}, false
	}
	for _, k := range mutate.Keys {
		if k.Where&where != 0 && string(name) == k.Name {
			return k, true
		}
	}
	return mutate.Key{}, false
}

// fnv hashes b into h (FNV-1a, 64 bits): clipped values and lists carry
// it, so that two are equal only when their JSON likely is.
func fnv(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

const fnvOffset = 14695981039346656037
