package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The reports of check (and audit) are written one object at a time, as
// walk hands them over: text as it comes, JSON with its objects written as
// they come and the summary at the end, SARIF with its results kept in a
// temporary file until the rules and notifications before them are known.
// None holds the objects, so memory follows the largest document.

// reporter writes a report one object at a time; finish writes what
// follows the objects.
type reporter interface {
	object(o object) error
	finish(t tally) error
}

// reporter returns the chosen format's reporter; nil for a format that
// needs every object at once (see write).
func (rf *reportFlags) reporter(w io.Writer, hint string) reporter {
	switch rf.output {
	case "text":
		return &textReporter{p: &printer{w: w}, hint: hint}
	case "json":
		return newJSONReporter(w, rf.failOn)
	case "sarif":
		return newSARIFReporter(w)
	}
	return nil
}

// stream writes the report as it reads the input, one document at a
// time, and returns the error that sets the exit code.
func (rf *reportFlags) stream(w io.Writer, in *input, hint string) error {
	r := rf.reporter(w, hint)
	if r == nil {
		var objs []object
		if err := in.each(func(o object) error { objs = append(objs, o); return nil }); err != nil {
			return err
		}
		return rf.write(w, objs, hint)
	}
	t := newTally()
	err := in.each(func(o object) error {
		t.add(o)
		return r.object(o)
	})
	if err != nil {
		return err
	}
	if err := r.finish(t); err != nil {
		return err
	}
	return rf.outcome(t)
}

// jsonReporter writes the JSON report (jsonReport) as encodeJSON would
// write it whole: the objects one by one, each indented at its depth in
// the array, then the summary.
type jsonReporter struct {
	w      io.Writer
	failOn string
	n      int
}

func newJSONReporter(w io.Writer, failOn string) *jsonReporter {
	return &jsonReporter{w: w, failOn: failOn}
}

// jsonObjectsKey is where the objects go in the report.
const jsonObjectsKey = `"objects": []`

func (r *jsonReporter) object(o object) error {
	if r.n == 0 {
		head, _, err := r.frame(tally{})
		if err != nil {
			return err
		}
		if _, err := r.w.Write(head); err != nil {
			return err
		}
	}
	b, err := encodeIndented(jsonObjectOf(o), "    ")
	if err != nil {
		return err
	}
	sep := ",\n    "
	if r.n == 0 {
		sep = "\n    "
	}
	r.n++
	_, err = io.WriteString(r.w, sep+string(b))
	return err
}

func (r *jsonReporter) finish(t tally) error {
	head, tail, err := r.frame(t)
	if err != nil {
		return err
	}
	if r.n == 0 {
		_, err = fmt.Fprintf(r.w, "%s]%s", head, tail)
		return err
	}
	_, err = fmt.Fprintf(r.w, "\n  ]%s", tail)
	return err
}

// frame is the report without objects, cut where they go: head ends with
// the array's "[", tail starts after its "]".
func (r *jsonReporter) frame(t tally) (head, tail []byte, err error) {
	var buf bytes.Buffer
	if err := encodeJSON(&buf, jsonReport{Objects: []jsonObject{}, Summary: jsonSummaryOf(t, r.failOn)}); err != nil {
		return nil, nil, err
	}
	return cut(buf.Bytes(), jsonObjectsKey, false)
}

// cut splits an encoded document around the empty array of key (`"key":
// []`): at its first occurrence, or its last.
func cut(doc []byte, key string, last bool) (head, tail []byte, err error) {
	i := bytes.Index(doc, []byte(key))
	if last {
		i = bytes.LastIndex(doc, []byte(key))
	}
	if i < 0 {
		return nil, nil, fmt.Errorf("internal error: %s not found in the encoded report", key)
	}
	at := i + len(key) - 1 // at the "]"
	return doc[:at], doc[at+1:], nil
}

// encodeIndented encodes v as encodeJSON does, as if at a depth of the
// document where lines start with prefix: without the final newline.
func encodeIndented(v any, prefix string) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetIndent(prefix, "  ")
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// sarifReporter writes the SARIF log. The run's rules and notifications
// come before its results in the document and depend on every object,
// so the results are written to a scratch file as they come and copied
// in at the end.
type sarifReporter struct {
	w         io.Writer
	run       sarifRun
	ruleIndex map[mutate.Reason]int
	results   *scratch
	n         int
}

func newSARIFReporter(w io.Writer) *sarifReporter {
	return &sarifReporter{w: w, run: sarifRunOf(), ruleIndex: map[mutate.Reason]int{}}
}

// sarifResultsKey is where the results go in the log: the last field of
// its one run.
const sarifResultsKey = `"results": []`

func (r *sarifReporter) object(o object) error {
	for _, res := range sarifAdd(&r.run, r.ruleIndex, o) {
		b, err := encodeIndented(res, "        ")
		if err != nil {
			return err
		}
		if r.results == nil {
			r.results = newScratch()
		}
		sep := ",\n        "
		if r.n == 0 {
			sep = "\n        "
		}
		r.n++
		if _, err := io.WriteString(r.results, sep+string(b)); err != nil {
			return err
		}
	}
	return nil
}

func (r *sarifReporter) finish(tally) error {
	defer r.results.close()
	var buf bytes.Buffer
	if err := encodeJSON(&buf, sarifLog{Schema: sarifSchema, Version: "2.1.0", Runs: []sarifRun{r.run}}); err != nil {
		return err
	}
	head, tail, err := cut(buf.Bytes(), sarifResultsKey, true)
	if err != nil {
		return err
	}
	if _, err := r.w.Write(head); err != nil {
		return err
	}
	if r.n > 0 {
		if err := r.results.copyTo(r.w); err != nil {
			return err
		}
		if _, err := io.WriteString(r.w, "\n      "); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(r.w, "]%s", tail)
	return err
}

// scratch is written, then read back once: a temporary file, or memory
// where none can be made (a read-only TMPDIR).
type scratch struct {
	f   *os.File
	mem bytes.Buffer
}

func newScratch() *scratch {
	s := &scratch{}
	if f, err := os.CreateTemp("", "kubectl-graceguard-report-*"); err == nil {
		s.f = f
	}
	return s
}

func (s *scratch) Write(b []byte) (int, error) {
	if s.f == nil {
		return s.mem.Write(b)
	}
	n, err := s.f.Write(b)
	if err != nil {
		err = fmt.Errorf("writing the report's scratch file %s: %w", s.f.Name(), err)
	}
	return n, err
}

// copyTo writes what was written to w.
func (s *scratch) copyTo(w io.Writer) error {
	if s.f == nil {
		_, err := s.mem.WriteTo(w)
		return err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w, s.f)
	return err
}

// close removes the file; a nil scratch is closed.
func (s *scratch) close() {
	if s == nil || s.f == nil {
		return
	}
	s.f.Close()
	os.Remove(s.f.Name())
}
