package budget

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxTerm is the largest duration accepted for any single budget term. Anything
// longer is almost certainly a typo (30m meant as 30s) and would hold nodes
// hostage during drains, so it is rejected rather than silently accepted.
const MaxTerm = time.Hour

// Infinity stands for a hook that never ends (`sleep infinity`): longer
// than any grace period. Format prints it as "infinity".
const Infinity = time.Duration(1<<63 - 1)

// AcceptedForms describes, for error messages, what ParseDuration accepts.
const AcceptedForms = "a Go duration (30s, 1m30s, 1500ms) or whole seconds (30), from 0 to 1h"

// Sentinel errors wrapped by *ParseError, for errors.Is.
var (
	ErrSyntax   = errors.New("not a duration")
	ErrNegative = errors.New("negative duration")
	ErrTooLong  = errors.New("duration over 1h")
)

// ParseError says why a duration text was refused. Its message names the
// value and the accepted forms, so callers can show it to a person as is.
type ParseError struct {
	Value string
	Err   error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%q is %s", e.Value, e.Problem())
}

// Problem says what is wrong and what is accepted, without the value:
// "longer than 1h; want a Go duration (...)".
func (e *ParseError) Problem() string { return e.reason() + "; want " + AcceptedForms }

func (e *ParseError) reason() string {
	switch {
	case errors.Is(e.Err, ErrNegative):
		return "negative"
	case errors.Is(e.Err, ErrTooLong):
		return "longer than 1h"
	default:
		return "not a duration"
	}
}

func (e *ParseError) Unwrap() error { return e.Err }

// ParseDuration reads a budget term: a Go duration ("30s", "1m30s", "1500ms")
// or a bare count of whole seconds ("30"). Surrounding spaces are ignored.
// The result is within [0, MaxTerm].
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, &ParseError{Value: s, Err: ErrSyntax}
	}
	if t[0] == '-' {
		// Negative, even "-0": a minus sign is a mistake in a budget term.
		if _, err := time.ParseDuration(t); err != nil && !isDigits(t[1:]) {
			return 0, &ParseError{Value: s, Err: ErrSyntax}
		}
		return 0, &ParseError{Value: s, Err: ErrNegative}
	}
	if isDigits(t) || (t[0] == '-' && isDigits(t[1:])) {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n > int64(MaxTerm/time.Second) {
			if t[0] == '-' {
				return 0, &ParseError{Value: s, Err: ErrNegative}
			}
			return 0, &ParseError{Value: s, Err: ErrTooLong}
		}
		return check(s, time.Duration(n)*time.Second)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		// time.ParseDuration reports overflow as a syntax error; tell the
		// person the truth when the text is a well-formed but huge duration.
		if strings.Contains(err.Error(), "invalid duration") && looksLikeHugeDuration(t) {
			return 0, &ParseError{Value: s, Err: ErrTooLong}
		}
		return 0, &ParseError{Value: s, Err: ErrSyntax}
	}
	return check(s, d)
}

func check(s string, d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, &ParseError{Value: s, Err: ErrNegative}
	case d > MaxTerm:
		return 0, &ParseError{Value: s, Err: ErrTooLong}
	}
	return d, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// looksLikeHugeDuration reports whether s is digits followed by a valid unit,
// e.g. "99999999999h", which time.ParseDuration refuses only for overflow.
func looksLikeHugeDuration(s string) bool {
	s = strings.TrimPrefix(s, "+")
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return false
	}
	switch s[i:] {
	case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		return true
	}
	return false
}

// CeilSeconds rounds d up to whole seconds, the unit the kubelet works in.
// Negative durations round to 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// Format prints d compactly for people: whole seconds as "45s", minutes as
// "1m30s", sub-second parts kept ("1.5s").
func Format(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d == Infinity {
		return "infinity"
	}
	s := d.String()
	// time.Duration.String prints "1m0s" and "1h0m0s"; trim the zero tails.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
