package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// ReportName is the name of a workload's ShutdownReport, in the workload's
// namespace: its kind in lower case and its name, "deployment-web". Names
// too long for an object name are cut and end in a hash of the whole. The
// observer names reports so, and the webhook finds them so.
func ReportName(kind, name string) string {
	n := strings.ToLower(kind) + "-" + name
	const maxName = 253
	if len(n) <= maxName {
		return n
	}
	h := sha256.Sum256([]byte(n))
	suffix := "-" + hex.EncodeToString(h[:])[:10]
	return strings.TrimRight(n[:maxName-len(suffix)], "-.") + suffix
}
