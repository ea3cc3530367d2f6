package flags

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Flag is one command-line flag: its name (from the table), its help and
// the value it fills. What the value must be is the filled
// configuration's Validate, which names the flag.
type Flag struct {
	Name  string
	Usage string
	Value pflag.Value
	// NoOptDefVal is the value of the flag given without one (booleans).
	NoOptDefVal string
}

// Bind registers f on fs, with the configuration's current value as its
// default.
func (f Flag) Bind(fs *pflag.FlagSet) {
	pf := fs.VarPF(f.Value, f.Name, "", f.Usage)
	pf.NoOptDefVal = f.NoOptDefVal
}

// Flags are the flags of one command, bound to the configuration they
// fill, and Check, that configuration's Validate: Bind registers them,
// Validate checks every value once all are parsed.
type Flags struct {
	List []Flag
	// Check validates what the flags filled. It must read the
	// configuration when called (func() error { return c.Validate() }),
	// not a copy taken before parsing (c.Validate as a method value).
	Check func() error
}

// Bind registers the flags on fs, with the configuration's current values
// as their defaults.
func (fl Flags) Bind(fs *pflag.FlagSet) {
	for _, f := range fl.List {
		f.Bind(fs)
	}
}

// Validate reports every flag whose value is wrong at once, each as
// --name=value: what is wrong; what is accepted.
func (fl Flags) Validate() error {
	if fl.Check == nil {
		return nil
	}
	return fl.Check()
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

// Then returns v running after once it is set: after's error restores the
// old value and refuses the flag.
func (v value[T]) Then(after func() error) value[T] {
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

// Duration accepts what annotations accept (budget.ParseDuration):
// Go durations or bare whole seconds, within 0..1h.
func Duration(p *time.Duration) value[time.Duration] {
	return value[time.Duration]{p, budget.ParseDuration, budget.Format, "duration", nil}
}

// GoDuration accepts a Go duration only, as time.ParseDuration does.
func GoDuration(p *time.Duration) value[time.Duration] {
	return value[time.Duration]{p, func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: want a Go duration (10s, 1m)", s)
		}
		return d, nil
	}, time.Duration.String, "duration", nil}
}

// Bytes is a byte count in Kubernetes quantity notation: 16Mi, 16777216.
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
	}, FormatBytes, "bytes", nil}
}

// ChoiceValue is a flag limited to a fixed set of words.
func ChoiceValue[T ~string](p *T, choices ...T) value[T] {
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

// FormatBytes prints a byte count as Bytes does: 16Mi.
func FormatBytes(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// CeilingDuration is a platform ceiling: a Go duration or whole seconds,
// 0 to MaxCeiling.
func CeilingDuration(p *time.Duration) value[time.Duration] {
	return value[time.Duration]{p, func(s string) (time.Duration, error) {
		s = strings.TrimSpace(s)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 && n <= int64(MaxCeiling/time.Second) {
			return time.Duration(n) * time.Second, nil
		}
		if d, err := time.ParseDuration(s); err == nil && d >= 0 && d <= MaxCeiling {
			return d, nil
		}
		return 0, fmt.Errorf("%q is not a duration from 0 to %s; want a Go duration (30s, 10m, 48h) or whole seconds (30)", s, budget.Format(MaxCeiling))
	}, budget.Format, "duration", nil}
}

// The flags the webhook and the observer share (the addresses), and the
// observer and the plugin's recommend (min-samples).

func MetricsAddressFlag(p *string) Flag {
	return Flag{Name: MetricsBindAddress.Name, Value: String(p), Usage: `address of Prometheus /metrics ("0" disables it)`}
}

func HealthAddressFlag(p *string) Flag {
	return Flag{Name: HealthProbeBindAddress.Name, Value: String(p), Usage: "address of /healthz and /readyz"}
}

func MinSamplesFlag(n *int) Flag {
	return Flag{Name: MinSamples.Name, Value: Int(n), Usage: "samples a recommendation needs when no Pod was killed"}
}
