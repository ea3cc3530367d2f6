package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/routingprobe"
)

// measureReport is what a finished measure-routing run prints from.
type measureReport struct {
	// Path is what the load went through: the URL, or the Service.
	Path     string
	Cluster  string
	Date     time.Time
	Replicas int
	Rate     int
	Result   routingprobe.Result
	Margin   time.Duration
	Profile  string
}

// writeMeasureReport prints the withdrawals, their statistics and plot,
// and the routing profile they give, in the form graceguard's chart and
// flags take it, with its source as a comment (--routing-profile has no
// field for it).
func writeMeasureReport(w io.Writer, r measureReport) error {
	var b strings.Builder
	rounds, failed := r.Result.Rounds, r.Result.Failed
	date := r.Date.Format(time.DateOnly)
	fmt.Fprintf(&b, "Routing withdrawal through %s (cluster %s, %s)\n", r.Path, r.Cluster, date)
	fmt.Fprintf(&b, "%s of %d probe Pods at %d requests/s: %d requests sent, %d failed\n\n",
		plural(len(rounds), "deletion"), r.Replicas, r.Rate, r.Result.Sent, failed)

	st := routingprobe.Summarize(routingprobe.Delays(rounds))
	fmt.Fprintf(&b, "withdrawal (delete call to the last request the Pod answered): min %s, median %s, p90 %s, max %s\n\n",
		routingprobe.FormatDelay(st.Min), routingprobe.FormatDelay(st.Median), routingprobe.FormatDelay(st.P90), routingprobe.FormatDelay(st.Max))
	delay := routingprobe.ProfileDelay(st.Max, r.Margin)
	if err := routingprobe.Plot(&b, rounds, delay); err != nil {
		return err
	}
	for _, rd := range rounds {
		if rd.Served == 0 {
			fmt.Fprintf(&b, "\n%s got no request after its delete call: the path withdrew it before then, or sent it too few requests to tell (raise --rate).\n", rd.Pod)
			break
		}
	}
	if r.Result.Skipped > 0 {
		fmt.Fprintf(&b, "\n%s not sent: too many were waiting for an answer (the path is slow; lower --rate).\n", plural(r.Result.Skipped, "request"))
	}
	if failed > 0 {
		fmt.Fprintf(&b, "\n%s failed: no probe Pod answered (an error status, a refused or cut connection, a timeout).\n", plural(failed, "request"))
	}

	source := fmt.Sprintf("kubectl graceguard measure-routing, cluster %s, %s, path %s, %s, %d requests",
		r.Cluster, date, r.Path, plural(len(rounds), "deletion"), r.Result.Sent)
	fmt.Fprintf(&b, "\nRouting profile %s: %s, the slowest withdrawal %s + margin %s, rounded up to whole seconds.\n",
		r.Profile, budget.Format(delay), routingprobe.FormatDelay(st.Max), budget.Format(r.Margin))
	fmt.Fprintf(&b, "Add it to graceguard's chart values (or run the webhook and the plugin with --routing-profile=%s=%s):\n\n", r.Profile, budget.Format(delay))
	fmt.Fprintf(&b, "  config:\n    routingProfiles:\n      # basis %s: %s\n      %s: {routingDelay: %s}\n\n",
		budget.BasisMeasurement, source, r.Profile, budget.Format(delay))
	fmt.Fprintf(&b, "and name it on the Pods, or the namespaces, behind this path:\n\n  metadata:\n    annotations:\n      %s: %s\n",
		mutate.AnnotationRoutingProfile, r.Profile)
	_, err := io.WriteString(w, b.String())
	return err
}
