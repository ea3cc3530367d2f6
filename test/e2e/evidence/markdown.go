package evidence

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"
)

// Files written by RenderFiles next to the Markdown, under its assets
// directory.
const (
	JSONName = "evidence.json"
	SVGName  = "timeline.svg"
	MDName   = "e2e.md"
)

// RenderFiles writes dir/e2e.md and, under dir/assets, evidence.json and
// timeline.svg ("." puts them next to the Markdown).
func RenderFiles(r *Run, dir, assets string) error {
	adir := filepath.Join(dir, assets)
	if err := os.MkdirAll(adir, 0o755); err != nil {
		return err
	}
	if err := r.Write(filepath.Join(adir, JSONName)); err != nil {
		return err
	}
	svg := TimelineSVG(r)
	if svg != "" {
		if err := os.WriteFile(filepath.Join(adir, SVGName), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, MDName), []byte(Markdown(r, assets)), 0o644)
}

func yes(ok bool) string {
	if ok {
		return "passed"
	}
	return "**FAILED**"
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n", " ")
	return s
}

func at(a At) string {
	if a == nil {
		return "not observed"
	}
	return fmt.Sprintf("%.2f s", float64(*a))
}

func secs(s Secs) string { return fmt.Sprintf("%.1f s", float64(s)) }

// The page (e2e.md.tmpl) and the pieces it uses more than once or picks
// by name (parts.md.tmpl).
var (
	//go:embed e2e.md.tmpl
	pageText string
	//go:embed parts.md.tmpl
	partsText string
)

// page is the template's whole input: the run, and what the page derives
// from it before any prose.
type page struct {
	*Run
	// JSONRef and SVGRef are the links from the page to its assets.
	JSONRef, SVGRef string
	// Suite is how long the suite ran.
	Suite   Secs
	Summary []summaryRow
}

// summaryRow is one scenario's line of the summary table; Name picks the
// template of its measured column (summary-NAME in parts.md.tmpl).
type summaryRow struct{ Name, Title, Result string }

// pageTemplate renders a page: e2e.md.tmpl, with the pieces its sections
// share in parts.md.tmpl.
var pageTemplate = newPageTemplate()

func newPageTemplate() *template.Template {
	t := template.New(MDName).Funcs(pageFuncs)
	// measured renders summary-NAME to a string: the summary table escapes
	// each line as one cell.
	t.Funcs(template.FuncMap{"measured": func(name string, r *Run) (string, error) {
		var b strings.Builder
		err := t.ExecuteTemplate(&b, "summary-"+name, r)
		return b.String(), err
	}})
	template.Must(t.Parse(pageText))
	template.Must(t.New("parts.md.tmpl").Parse(partsText))
	return t
}

// pageFuncs format the figures of a Run for the page; the prose around
// them is the template's.
var pageFuncs = template.FuncMap{
	"yes": yes, "secs": secs, "at": at, "cell": cell, "orNone": OrNone, "join": strings.Join, "onOff": onOff,
	"kinds":     kinds,
	"inc":       func(i int) int { return i + 1 },
	"answer":    answer,
	"trimExec":  func(s string) string { return strings.TrimPrefix(s, "exec ") },
	"ms":        func(s Secs) string { return fmt.Sprintf("%.0f", 1000*float64(s)) },
	"window":    func(e EndpointFailures) float64 { return float64(e.Last - e.First) },
	"exit":      exitOf,
	"firstLine": firstLine,
	"code":      codeList,
	"bytes":     byteSize,
	"count":     count,
	"cpu":       cpuTime,
	"quotes":    quoteList,
	// num is a count that may not have been observed.
	"num": func(n *int) string {
		if n == nil {
			return "not observed"
		}
		return fmt.Sprint(*n)
	},
	// value is a moment the template has already found observed.
	"value": func(a At) Secs { return *a },
}

// Markdown renders a Run as docs/e2e.md; assets is the path from the
// Markdown to evidence.json and timeline.svg.
func Markdown(r *Run, assets string) string {
	return render(MDName, newPage(r, assets))
}

// Summary renders the summary table of a Run's page, its "## Summary"
// section: a line per scenario, its result and key numbers.
func Summary(r *Run) string {
	return render("summary", newPage(r, "."))
}

func newPage(r *Run, assets string) page {
	ref := func(name string) string {
		if assets == "" || assets == "." {
			return name
		}
		return assets + "/" + name
	}
	p := page{Run: r, JSONRef: ref(JSONName), SVGRef: ref(SVGName), Suite: Secs(r.Finished.Sub(r.Started).Seconds())}
	for _, s := range r.scenarios() {
		res := "not run"
		if s.ran {
			res = yes(s.passed())
		}
		p.Summary = append(p.Summary, summaryRow{Name: s.name, Title: s.title, Result: res})
	}
	return p
}

func render(name string, p page) string {
	var b strings.Builder
	if err := pageTemplate.ExecuteTemplate(&b, name, p); err != nil {
		// The templates are fixed and their input a plain struct: an error
		// is a bug in a template, which every test of this package renders.
		panic(fmt.Sprintf("%s: %v", MDName, err))
	}
	return b.String()
}

// answer shortens what a client got (the e2e suite's result strings:
// "200 {...}", "502 Bad Gateway", "error (eof): ...") to its status or
// error class, and "completed" when the app's answer says so.
func answer(s string) string {
	if rest, ok := strings.CutPrefix(s, "error ("); ok {
		class, _, _ := strings.Cut(rest, ")")
		return "error (" + class + ")"
	}
	code, _, _ := strings.Cut(s, " ")
	if code == "" {
		return "none"
	}
	if strings.Contains(s, `"completed":true`) {
		return code + " completed"
	}
	return code
}

func cpuTime(s Secs) string {
	if s < 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.1f s", float64(s))
}

// quoteList is ": "a", "b"" for a non-empty list.
func quoteList(l []string) string {
	if len(l) == 0 {
		return ""
	}
	var q []string
	for _, s := range l {
		q = append(q, fmt.Sprintf("%q", s))
	}
	return ": " + strings.Join(q, ", ")
}

func codeList(keys []string) string {
	var out []string
	for _, k := range keys {
		out = append(out, "`"+k+"`")
	}
	return strings.Join(out, ", ")
}

// byteSize is ByteSize of a count of either integer type the Run uses.
func byteSize(n any) (string, error) {
	switch n := n.(type) {
	case int:
		return ByteSize(int64(n)), nil
	case int64:
		return ByteSize(n), nil
	}
	return "", fmt.Errorf("bytes: %T is not a size in bytes", n)
}

// ByteSize is a size in MiB (KiB under one); negative: not measured.
func ByteSize(n int64) string {
	switch {
	case n < 0:
		return "not measured"
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n == 0:
		return "0"
	}
	return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
}

func count(n int64) string {
	if n < 0 {
		return "not measured"
	}
	return fmt.Sprint(n)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// OrNone is s, or "none" when it is empty.
func OrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// kinds is KindList of a count by kind of either value type the Run uses.
func kinds(m any) (string, error) {
	switch m := m.(type) {
	case map[string]int:
		return KindList(m), nil
	case map[string]float64:
		return KindList(m), nil
	}
	return "", fmt.Errorf("kinds: %T is not a count by kind", m)
}

// KindList is "kind count, ..." sorted, or "none".
func KindList[V int | float64](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s %v", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func exitOf(c *int32) string {
	if c == nil {
		return "not observed"
	}
	return fmt.Sprint(*c)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 220 {
		s = s[:220] + "..."
	}
	return s
}
