package helmhook

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/graceguard/graceguard/pkg/certs"
	"github.com/graceguard/graceguard/pkg/flags"
)

// Check is one of `webhook selftest`'s checks.
type Check string

const (
	// CheckService calls every webhook of the release's configurations
	// the way the API server calls it.
	CheckService Check = "service"
	// CheckMutation creates a server-side dry-run Pod in an opted-in
	// namespace and wants it back treated by graceguard.
	CheckMutation Check = "mutation"
)

// Checks are the checks `webhook selftest --check` accepts.
var Checks = []Check{CheckService, CheckMutation}

// DefaultTimeout is how long a hook's command keeps trying by default.
const DefaultTimeout = time.Minute

// SelftestConfig is `webhook selftest`'s configuration
// (config.SelftestFlags binds it).
type SelftestConfig struct {
	Check Check
	// Namespace is the release namespace, graceguard's own: the service
	// check's reviews are of objects there, which graceguard never treats,
	// so they change nothing and count as no Pod's decision.
	Namespace string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration are
	// the release's, whose webhooks the service check calls.
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	// TestNamespace is an opted-in namespace the mutation check creates
	// its dry-run Pod in, and Image that Pod's image (never pulled).
	TestNamespace string
	Image         string
	// Timeout bounds the retries.
	Timeout time.Duration
}

// DefaultSelftest returns the defaults: the namespace from
// $POD_NAMESPACE, as the chart's Pods set it.
func DefaultSelftest() SelftestConfig {
	return SelftestConfig{Check: CheckService, Namespace: os.Getenv("POD_NAMESPACE"), Timeout: DefaultTimeout}
}

// Validate names every flag whose value the chosen check cannot use, its
// value and what is accepted.
func (c SelftestConfig) Validate() error {
	errs := []error{flags.HookTimeout.Check(c.Timeout)}
	switch c.Check {
	case CheckService:
		errs = append(errs,
			required(flags.Namespace, c.Namespace, certs.CheckNamespace, "the release namespace, whose objects the reviews are of (default $POD_NAMESPACE)"),
			required(flags.MutatingWebhookConfiguration, c.MutatingWebhookConfiguration, certs.CheckWebhookConfiguration, "the release's, whose webhooks are called"),
			required(flags.ValidatingWebhookConfiguration, c.ValidatingWebhookConfiguration, certs.CheckWebhookConfiguration, "the release's, whose webhooks are called"),
		)
	case CheckMutation:
		errs = append(errs,
			required(flags.TestNamespace, c.TestNamespace, certs.CheckNamespace, "a namespace labelled graceguard.io/inject=enabled to create the dry-run Pod in"),
			required(flags.Image, c.Image, func(string) error { return nil }, "the dry-run Pod's image (never pulled)"),
		)
	default:
		errs = append(errs, flags.Invalid(flags.Check, string(c.Check), fmt.Errorf("want one of %s", checkNames())))
	}
	return errors.Join(errs...)
}

// UnregisterConfig is `webhook unregister`'s configuration
// (config.UnregisterFlags binds it).
type UnregisterConfig struct {
	// Release and Namespace are the Helm release that must own the
	// configurations (its meta.helm.sh/release-name and
	// meta.helm.sh/release-namespace annotations).
	Release   string
	Namespace string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration are
	// the configurations to delete.
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	// Timeout bounds the API calls.
	Timeout time.Duration
}

// DefaultUnregister returns the defaults: the namespace from
// $POD_NAMESPACE, as the chart's Job sets it.
func DefaultUnregister() UnregisterConfig {
	return UnregisterConfig{Namespace: os.Getenv("POD_NAMESPACE"), Timeout: DefaultTimeout}
}

// Validate names every flag at fault, its value and what is accepted.
func (c UnregisterConfig) Validate() error {
	return errors.Join(
		required(flags.Release, c.Release, checkRelease, "the Helm release that owns the webhook configurations"),
		required(flags.Namespace, c.Namespace, certs.CheckNamespace, "the release's namespace (default $POD_NAMESPACE)"),
		required(flags.MutatingWebhookConfiguration, c.MutatingWebhookConfiguration, certs.CheckWebhookConfiguration, "the release's, to delete"),
		required(flags.ValidatingWebhookConfiguration, c.ValidatingWebhookConfiguration, certs.CheckWebhookConfiguration, "the release's, to delete"),
		flags.HookTimeout.Check(c.Timeout),
	)
}

// required says, naming the flag, that value is empty (what is wanted) or
// breaks rule.
func required(flag, value string, rule func(string) error, want string) error {
	if value == "" {
		return flags.Invalid(flag, "", errors.New("required: "+want))
	}
	if err := rule(value); err != nil {
		return flags.Invalid(flag, value, err)
	}
	return nil
}

// checkRelease holds a release name to what Helm accepts: a DNS-1123
// subdomain of at most 53 characters.
func checkRelease(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	if len(name) > 53 {
		return fmt.Errorf("must be no more than 53 characters (Helm's limit), not %d", len(name))
	}
	return nil
}

func checkNames() string {
	names := make([]string, len(Checks))
	for i, c := range Checks {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}
