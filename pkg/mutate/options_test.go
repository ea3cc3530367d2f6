package mutate_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
)

func TestDefaultOptionsAreValid(t *testing.T) {
	if err := mutate.DefaultOptions().Validate(); err != nil {
		t.Fatalf("the documented defaults: %v", err)
	}
	o := mutate.DefaultOptions()
	o.Profiles = nil // the built-in ones
	if err := o.Validate(); err != nil {
		t.Fatalf("nil Profiles: %v", err)
	}
}

// Each setting the options validate, set wrong: the error names the flag
// that sets it, the value as the flag prints it, and what is accepted.
func TestOptionsValidateNamesTheFlagTheValueAndWhatIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*mutate.Options)
		want []string
	}{
		{name: "a negative default term", edit: func(o *mutate.Options) { o.Defaults.Work = -time.Second },
			want: []string{"--default-max-work=-1s: must be between 0 and 1h"}},
		{name: "a default term over 1h", edit: func(o *mutate.Options) { o.Defaults.Cleanup = 2 * time.Hour },
			want: []string{"--default-cleanup=2h: must be between 0 and 1h"}},
		{name: "a cap under 1s", edit: func(o *mutate.Options) { o.MaxGrace = 500 * time.Millisecond },
			want: []string{"--max-grace-period=500ms: must be at least 1s"}},
		{name: "a cap the defaults do not fit", edit: func(o *mutate.Options) { o.MaxGrace = 20 * time.Second },
			want: []string{"--max-grace-period=20s: the default budget alone needs 30s (routing 5s + work 20s + cleanup 2s + margin 3s)"}},
		{name: "a preStop handler there is none of", edit: func(o *mutate.Options) { o.PreStop = "wait" },
			want: []string{`--prestop-handler=wait: unsupported preStop handler "wait": want "sleep", "exec" or "none"`}},
		{name: "no preStop handler", edit: func(o *mutate.Options) { o.PreStop = "" },
			want: []string{`--prestop-handler: unsupported preStop handler ""`}},
		{name: "a mode there is none of", edit: func(o *mutate.Options) { o.Mode = "strict" },
			want: []string{`--default-mode=strict: unsupported mode "strict": want "enforce" or "warn"`}},
		{name: "an untreated-pods policy there is none of", edit: func(o *mutate.Options) { o.Untreated = "retry" },
			want: []string{`--untreated-pods=retry: want "deny" or "admit"`}},
		{name: "a profile given twice", edit: func(o *mutate.Options) {
			p, _ := budget.ParseProfile("x=1s")
			o.Profiles = append(o.Profiles, p, p)
		}, want: []string{`--routing-profile: "x" is given twice`}},
		{name: "a profile that does not validate", edit: func(o *mutate.Options) {
			o.Profiles = append(o.Profiles, budget.Profile{Name: "Corp", Routing: time.Second})
		}, want: []string{`--routing-profile: Corp=1s: name "Corp" is not a DNS-1123 label`}},
		{name: "an unknown default profile", edit: func(o *mutate.Options) { o.DefaultProfile = "aws-nlb" },
			want: []string{"--default-routing-profile=aws-nlb: no such profile; want one of " + strings.Join(budget.ProfileNames(budget.BuiltinProfiles()), ", ")}},
		{name: "a default profile over the cap", edit: func(o *mutate.Options) { o.DefaultProfile, o.MaxGrace = "aws-nlb-ip", time.Minute },
			want: []string{"--default-routing-profile=aws-nlb-ip: its Pods need 145s, over --max-grace-period=1m"}},
		{name: "a negative Karpenter ceiling", edit: func(o *mutate.Options) {
			o.Ceilings = []budget.Ceiling{{Name: mutate.CeilingKarpenter, Limit: -time.Second}}
		}, want: []string{"--karpenter-termination-grace-period=-1s: must not be negative"}},
		{name: "a negative node shutdown ceiling", edit: func(o *mutate.Options) {
			o.Ceilings = []budget.Ceiling{{Name: mutate.CeilingNodeShutdown, Limit: -5 * time.Second}}
		}, want: []string{"--node-shutdown-grace-period=-5s: must not be negative"}},
		{name: "a negative ceiling no flag sets", edit: func(o *mutate.Options) {
			o.Ceilings = []budget.Ceiling{{Name: "spot", Limit: 2 * time.Minute}, {Name: "quota", Limit: -time.Second}}
		}, want: []string{"Ceilings[1] (quota): limit -1s: must not be negative"}},
		{name: "everything wrong at once", edit: func(o *mutate.Options) {
			o.Defaults.Margin, o.Mode, o.DefaultProfile = -time.Second, "strict", "corp"
		}, want: []string{"--default-safety-margin=-1s", "--default-mode=strict", "--default-routing-profile=corp: no such profile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mutate.DefaultOptions()
			tc.edit(&o)
			err := o.Validate()
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to say %q", err, w)
				}
			}
		})
	}
}

// A flag's error is a *flags.Error naming the flag, so a caller can tell
// which flag to point at without reading the message.
func TestOptionsErrorsNameTheirFlag(t *testing.T) {
	o := mutate.DefaultOptions()
	o.MaxGrace = 20 * time.Second
	var fe *flags.Error
	if err := o.Validate(); !errors.As(err, &fe) || fe.Flag != flags.MaxGracePeriod || fe.Value != "20s" {
		t.Fatalf("Validate() = %v (%#v), want a *flags.Error for --%s=20s", err, fe, flags.MaxGracePeriod)
	}
}

// The flag of a term's cluster default is the annotation's name after
// "graceguard.io/", so a person who knows one knows the other.
func TestTermDefaultFlagsAreTheAnnotationsNames(t *testing.T) {
	for _, term := range budget.Terms {
		want := "default-" + strings.TrimPrefix(mutate.KeyFor(term), "graceguard.io/")
		if got := flags.TermDefault(term); got != want {
			t.Errorf("the %s term's default flag is --%s, want --%s (from %s)", term, got, want, mutate.KeyFor(term))
		}
	}
}
