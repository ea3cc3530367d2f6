package observer

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
)

// sampleName is a Pod's name as a sample records it: as it is up to
// v1alpha1.MaxPodNameLength bytes (every built-in controller's Pods), else
// cut and ended in a hash of the whole, so that two long names stay apart.
func sampleName(name string) string {
	if len(name) <= v1alpha1.MaxPodNameLength {
		return name
	}
	h := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(h[:])[:10]
	return strings.TrimRight(name[:v1alpha1.MaxPodNameLength-len(suffix)], "-.") + suffix
}

// bounded returns s within the bounds the CRD states. The observer makes
// its samples so; reports written before those bounds may hold longer
// values, and the API server would refuse the whole status with them.
func bounded(s v1alpha1.Sample) v1alpha1.Sample {
	s.Pod = sampleName(s.Pod)
	s.Container = cut(s.Container, v1alpha1.MaxContainerNameLength)
	s.Reason = cut(s.Reason, v1alpha1.MaxReasonLength)
	if len(s.Budget) > v1alpha1.MaxBudgetLength {
		s.Budget = ""
	}
	return s
}

// maxReportBytes bounds a report as the observer writes it (JSON), with
// 50 samples and every string and number at its bound: 32,178 bytes
// measured (TestTheWorstReportIsBounded), 593 per sample. The API server
// adds its metadata (managedFields, uid, resourceVersion).
const maxReportBytes = 32 << 10

// maxWorstNote bounds the notes of the observer's events, every value at
// its bound: 930 bytes measured (TestEventNotes, failed and hung hooks
// mixed), so maxNote never cuts.
const maxWorstNote = 960
