package server

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/graceguard/graceguard/internal/version"
)

func TestBuildInfoNamesTheRunningBuild(t *testing.T) {
	reg := prometheus.NewRegistry()
	for i := 0; i < 2; i++ { // a second Run in the same process reuses it
		if err := registerBuildInfo(reg); err != nil {
			t.Fatalf("registration %d: %v", i+1, err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != BuildInfoName || len(families[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want one %s series", families, BuildInfoName)
	}
	m := families[0].GetMetric()[0]
	if m.GetGauge().GetValue() != 1 {
		t.Errorf("value %v, want 1", m.GetGauge().GetValue())
	}
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	want := map[string]string{"version": version.Get(), "go_version": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q (all: %v)", k, labels[k], v, labels)
		}
	}
}
