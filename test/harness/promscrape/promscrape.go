// Package promscrape reads the Prometheus text exposition of a process's
// /metrics or of the API server's, for the lab's runs (test/bench,
// test/scale).
package promscrape

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Families is one scrape, by metric family name.
type Families map[string]*dto.MetricFamily

// Parse reads a text exposition.
func Parse(b []byte) (Families, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return Families(fams), nil
}

// Get reads a process's /metrics over HTTP.
func Get(ctx context.Context, url string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %.200s", url, resp.StatusCode, b)
	}
	return Parse(b)
}

// APIServer reads the API server's /metrics as the client's user.
func APIServer(ctx context.Context, kube kubernetes.Interface) (Families, error) {
	b, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics of the API server: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's /metrics: %w", err)
	}
	return f, nil
}
