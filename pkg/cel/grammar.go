package cel

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// lit is a CEL string literal of s, in single quotes, or double when s
// holds a single one. s must not hold both, a backslash or a line break:
// every literal built here is a name or a sentence of graceguard's.
func lit(s string) string {
	if strings.ContainsAny(s, "\\\n") || strings.Contains(s, "'") && strings.Contains(s, `"`) {
		panic("pkg/cel: a literal CEL cannot quote as it is: " + s)
	}
	if strings.Contains(s, "'") {
		return `"` + s + `"`
	}
	return "'" + s + "'"
}

// list is a CEL list literal of strings.
func list(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = lit(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Durations. A budget term CEL reads is whole seconds of at most four
// digits, or a Go duration whose numbers have at most four digits before a
// fraction of at most nine (so CEL's duration() never overflows, and reads
// it as budget.ParseDuration does), within budget.MaxTerm. Anything else
// budget.ParseDuration may accept is left to the webhook.
const (
	secondsPattern  = `[0-9]{1,4}`
	durationPattern = `([0-9]{1,4}(\.[0-9]{1,9})?(h|m|s|ms|us|µs|ns)){1,6}`
)

// DurationPattern is the regular expression (RE2, as CEL's matches reads
// it) of the durations CEL reads besides whole seconds.
const DurationPattern = durationPattern

// maxTerm is budget.MaxTerm as a CEL duration.
var maxTerm = "duration(" + lit(budget.Format(budget.MaxTerm)) + ")"

// durationOf is CEL: the string v (bounded by the caller) as a CEL
// duration, when durationOK holds.
func durationOf(v string) string {
	return "(" + v + ".matches(r'^" + secondsPattern + "$') ? duration(" + v + " + 's') : duration(" + v + "))"
}

// durationOK is CEL: the string v (bounded by the caller) is a duration
// CEL reads as graceguard does, at most budget.MaxTerm.
func durationOK(v string) string {
	return "((" + v + ".matches(r'^" + secondsPattern + "$') || " + v + ".matches(r'^" + durationPattern + "$')) && " + durationOf(v) + " <= " + maxTerm + ")"
}

// The record (graceguard.io/budget, budget.Budget.Annotation): the four
// terms people set, in budget.Terms' order, then the grace. A record with
// another term (a mesh proxy's) is not one CEL reads.
var recordPattern = func() string {
	var b strings.Builder
	b.WriteString("^")
	for _, t := range budget.Terms {
		b.WriteString(string(t) + "=" + durationPattern + " ")
	}
	b.WriteString(`grace=[0-9]{1,9}s$`)
	return b.String()
}()

// RecordPattern is the regular expression of the records CEL reads.
var RecordPattern = recordPattern

// term is CEL: the text of term t in record b (which matched
// recordPattern first).
func term(b string, t budget.Term) string {
	return b + ".find(r'(^| )" + string(t) + "=[^ ]*').split('=')[1]"
}

// recordGrace is CEL: the grace of record b (which matched recordPattern).
func recordGrace(b string) string {
	return "int(" + b + ".find(r'[0-9]{1,9}s$').replace('s', ''))"
}

// Hooks. CEL reads a preStop hook's length in three shapes, each a subset
// of what mutate.PreStopLength reads, with the same result:
//
//   - the sleep action: its seconds;
//   - exec [SLEEP, N]: SLEEP is mutate.SleepCommand or a path ending in
//     /sleep, N whole seconds of at most six digits, optionally with an s;
//   - exec [SHELL, -c, SCRIPT]: SHELL one of mutate.Shells (or a path to
//     one), a flag of letters with a c, and SCRIPT a single `sleep N`
//     (optionally after exec, the program by path), spaces around.
//
// Every word is bounded, and made of characters that print the same in Go
// and CEL (no quotes, backslashes or control characters), so the words of
// a hook CEL reads are quoted alike in both languages' messages.
const (
	// maxPathLength bounds the program's path; maxScriptLength the script.
	maxPathLength   = 256
	maxScriptLength = 64
	wordChars       = `[-A-Za-z0-9._/+=:@,]`
	secondsArg      = `[0-9]{1,6}s?`
)

var (
	sleepPath   = `^(` + wordChars + `{0,` + strconv.Itoa(maxPathLength) + `}/)?` + regexp.QuoteMeta(mutate.SleepCommand) + `$`
	shellPath   = `^(` + wordChars + `{0,` + strconv.Itoa(maxPathLength) + `}/)?(` + strings.Join(mutate.Shells, "|") + `)$`
	shellFlag   = `^-[A-Za-z]{0,8}c[A-Za-z]{0,8}$`
	sleepScript = `^ *(exec +)?(` + wordChars + `{0,` + strconv.Itoa(maxPathLength) + `}/)?` + regexp.QuoteMeta(mutate.SleepCommand) + ` +` + secondsArg + ` *$`
)

// HookSeconds is CEL: the length in whole seconds of the preStop hook of
// container c (an expression), as graceguard reads it: 0 without a hook,
// the seconds of a shape CEL reads, -1 for any other hook (its length is
// the webhook's to read).
func HookSeconds(c string) string {
	h := c + ".lifecycle.preStop"
	return "(!" + c + ".?lifecycle.?preStop.hasValue() ? 0 : " +
		h + ".?sleep.hasValue() ? " + h + ".sleep.?seconds.orValue(-1) : " +
		"[" + h + ".?exec.?command.orValue([])].map(x, " + execSeconds("x") + ")[0])"
}

// execSeconds is CEL: the seconds of exec command x, or -1.
func execSeconds(x string) string {
	w := func(i int) string { return x + "[" + strconv.Itoa(i) + "]" }
	direct := "size(" + x + ") == 2 && size(" + w(0) + ") <= " + strconv.Itoa(maxPathLength+1+len(mutate.SleepCommand)) +
		" && size(" + w(1) + ") <= 7 && " + w(0) + ".matches(r'" + sleepPath + "') && " + w(1) + ".matches(r'^" + secondsArg + "$')"
	shell := "size(" + x + ") == 3 && size(" + w(0) + ") <= " + strconv.Itoa(maxPathLength+5) +
		" && size(" + w(1) + ") <= 17 && size(" + w(2) + ") <= " + strconv.Itoa(maxScriptLength) +
		" && " + w(0) + ".matches(r'" + shellPath + "') && " + w(1) + ".matches(r'" + shellFlag + "') && " + w(2) + ".matches(r'" + sleepScript + "')"
	return "(" + direct + " ? int(" + w(1) + ".replace('s', '')) : " +
		shell + " ? int(" + w(2) + ".find(r'[0-9]{1,6}s? *$').find(r'[0-9]+')) : -1)"
}

// HookDesc is CEL: how graceguard describes container c's preStop hook in
// a message (mutate's hookLength.Desc), for a hook HookSeconds reads.
func HookDesc(c string) string {
	h := c + ".lifecycle.preStop"
	return "(" + h + ".?sleep.hasValue() ? 'sleep ' + string(" + h + ".sleep.seconds) + 's' : " +
		"['exec ' + " + h + ".exec.command.join(' ')].map(d, size(d) <= 60 ? d : d.substring(0, 57) + '...')[0])"
}
