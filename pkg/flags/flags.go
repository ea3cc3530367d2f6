package flags

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/graceguard/graceguard/pkg/budget"
)

// flag is one command-line flag: its name, its help, the value it fills
// and the rule that value must meet once every flag is parsed. The name is
// spelled here and nowhere else: errors, help and the rule all read it.
type Flag struct {
	Name  string
	Usage string
	Value pflag.Value
	// check says what is wrong with the value, and what is accepted, or
	// returns nil. It may read other flags' values (a required Secret
	// name in self-managed mode, a cap the defaults must fit).
	Check func() error
	// noOptDefVal is the value of the flag given without one (booleans).
	NoOptDefVal string
}

// Flags are the flags of one command, bound to the configuration they
// fill: Bind registers them, Validate checks every value after parsing.
type Flags []Flag

// Bind registers the flags on fs, with the configuration's current values
// as their defaults.
func (fl Flags) Bind(fs *pflag.FlagSet) {
	for _, f := range fl {
		pf := fs.VarPF(f.Value, f.Name, "", f.Usage)
		pf.NoOptDefVal = f.NoOptDefVal
	}
}

// Validate checks every flag's value and reports all that are wrong at
// once, each as --name=value: what is wrong; what is accepted.
func (fl Flags) Validate() error {
	var errs []error
	for _, f := range fl {
		if f.Check == nil {
			continue
		}
		if err := f.Check(); err != nil {
			if v := f.Value.String(); v != "" {
				errs = append(errs, fmt.Errorf("--%s=%s: %w", f.Name, v, err))
			} else {
				errs = append(errs, fmt.Errorf("--%s: %w", f.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// value is a pflag.Value over a field of a configuration: parse reads a
// flag's text, format prints the field (help defaults, errors), and
// after, when set, runs once the field holds the new Value: its error
// restores the old one and refuses the flag.
type value[T any] struct {
	p      *T
	parse  func(string) (T, error)
	format func(T) string
	typ    string
	after  func() error
}

func (v value[T]) String() string {
	if v.p == nil {
		return ""
	}
	return v.format(*v.p)
}

func (v value[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	old := *v.p
	*v.p = x
	if v.after != nil {
		if err := v.after(); err != nil {
			*v.p = old
			return err
		}
	}
	return nil
}

// then returns v running after once it is set.
func (v value[T]) then(after func() error) value[T] {
	v.after = after
	return v
}

func (v value[T]) Type() string { return v.typ }

func String(p *string) value[string] {
	return value[string]{p, func(s string) (string, error) { return s, nil }, func(s string) string { return s }, "string", nil}
}

func Bool(p *bool) value[bool] {
	return value[bool]{p, strconv.ParseBool, strconv.FormatBool, "bool", nil}
}

func Int[T int | int64](p *T) value[T] {
	return value[T]{p, func(s string) (T, error) {
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number", s)
		}
		return T(n), nil
	}, func(n T) string { return strconv.FormatInt(int64(n), 10) }, "int", nil}
}

// durationValue accepts what annotations accept (budget.ParseDuration):
// Go durations or bare whole seconds, within 0..1h.
func Duration(p *time.Duration) value[time.Duration] {
	return value[time.Duration]{p, budget.ParseDuration, budget.Format, "duration", nil}
}

// goDurationValue accepts a Go duration only, as time.ParseDuration does.
func GoDuration(p *time.Duration) value[time.Duration] {
	return value[time.Duration]{p, func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: want a Go duration (10s, 1m)", s)
		}
		return d, nil
	}, time.Duration.String, "duration", nil}
}

// bytesValue is a byte count in Kubernetes quantity notation: 16Mi, 16777216.
func Bytes(p *int64) value[int64] {
	return value[int64]{p, func(s string) (int64, error) {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a byte count: want a quantity like 16Mi or 16777216", s)
		}
		n, ok := q.AsInt64()
		if !ok {
			return 0, fmt.Errorf("%q is not a whole number of bytes: want a quantity like 16Mi", s)
		}
		return n, nil
	}, func(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }, "bytes", nil}
}

// ChoiceValue is a flag limited to a fixed set of words; the kubectl
// plugin's flags use it too.
func ChoiceValue[T ~string](p *T, choices ...T) pflag.Value {
	return choice(p, choices)
}

func choice[T ~string](p *T, choices []T) value[T] {
	names := make([]string, len(choices))
	for i, c := range choices {
		names[i] = string(c)
	}
	return value[T]{p, func(s string) (T, error) {
		if !slices.Contains(choices, T(s)) {
			return "", fmt.Errorf("%q is not one of %s", s, strings.Join(names, ", "))
		}
		return T(s), nil
	}, func(t T) string { return string(t) }, strings.Join(names, "|"), nil}
}

// listValue is a comma-separated list, like pflag's StringSlice: the
// first use replaces the default, later ones append.
type listValue struct {
	p   *[]string
	set bool
}

func (v *listValue) String() string {
	if v.p == nil {
		return ""
	}
	return "[" + strings.Join(*v.p, ",") + "]"
}

func (v *listValue) Set(s string) error {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	if !v.set {
		*v.p, v.set = nil, true
	}
	*v.p = append(*v.p, items...)
	return nil
}

func (v *listValue) Type() string { return "strings" }

// List is a comma-separated list of strings filling p.
func List(p *[]string) pflag.Value { return &listValue{p: p} }

// between checks that a duration is within [lo, hi].
func Between(d *time.Duration, lo, hi time.Duration) func() error {
	return func() error {
		if *d < lo || *d > hi {
			return fmt.Errorf("want %s to %s", budget.Format(lo), budget.Format(hi))
		}
		return nil
	}
}

// inRange checks that a number is within [lo, hi].
func InRange[T int | int64](n *T, lo, hi T, why string) func() error {
	return func() error {
		if *n < lo || *n > hi {
			return fmt.Errorf("want %d to %d%s", lo, hi, why)
		}
		return nil
	}
}

// The address flags the webhook and the observer share.

func MetricsAddress(p *string) Flag {
	return Flag{Name: "metrics-bind-address", Value: String(p), Usage: `address of Prometheus /metrics ("0" disables it)`,
		Check: func() error {
			if *p == "0" {
				return nil
			}
			if err := checkAddr(*p); err != nil {
				return fmt.Errorf("%v; want host:port, :port or 0", err)
			}
			return nil
		}}
}

func HealthAddress(p *string) Flag {
	return Flag{Name: "health-probe-bind-address", Value: String(p), Usage: "address of /healthz and /readyz",
		Check: func() error {
			if err := checkAddr(*p); err != nil {
				return fmt.Errorf("%v; want host:port or :port", err)
			}
			return nil
		}}
}

func checkAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not 0-65535", port)
	}
	return nil
}
