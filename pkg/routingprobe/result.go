package routingprobe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Result is a finished measurement: its rounds and its load's counts. The
// in-cluster client prints it as one line of its log (WriteResult), which
// the plugin reads back (ParseResult).
type Result struct {
	Rounds []Round `json:"rounds"`
	// Sent counts the requests answered or failed; Failed those no probe
	// answered; Skipped the requests not sent (too many in flight).
	Sent    int `json:"sent"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// ResultOf counts samples into a Result.
func ResultOf(rounds []Round, samples []Sample, skipped int) Result {
	r := Result{Rounds: rounds, Sent: len(samples), Skipped: skipped}
	for _, s := range samples {
		if s.Err != "" {
			r.Failed++
		}
	}
	return r
}

// resultPrefix marks the result's line among the client's log lines.
const resultPrefix = "graceguard-measure-result "

// WriteResult prints r as the one line ParseResult finds.
func WriteResult(w io.Writer, r Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", resultPrefix, b)
	return err
}

// ParseResult finds the result's line in a client's log. Its error quotes
// the log's last line when there is none: why the client stopped.
func ParseResult(log []byte) (Result, error) {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if js, ok := strings.CutPrefix(line, resultPrefix); ok {
			var r Result
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				return Result{}, fmt.Errorf("the client's result does not parse: %w", err)
			}
			return r, nil
		}
		last = line
	}
	if err := sc.Err(); err != nil {
		return Result{}, fmt.Errorf("reading the client's log: %w", err)
	}
	if last == "" {
		return Result{}, errors.New("the client's log is empty")
	}
	return Result{}, fmt.Errorf("the client printed no result; its last line: %s", last)
}

// NewClient is the load's HTTP client. Each request opens a new
// connection: a load balancer routes connections, and one kept alive would
// keep reaching a withdrawn Pod until the Pod closed it. Redirects are
// answers, not followed.
func NewClient() *http.Client {
	return newClient(nil)
}

// NewClientFor is NewClient sending host in each request's Host header
// ("" : the URL's), for a path that routes by host to an address.
func NewClientFor(host string) *http.Client {
	if host == "" {
		return NewClient()
	}
	return newClient(func(r *http.Request) { r.Host = host })
}

func newClient(edit func(*http.Request)) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	var rt http.RoundTripper = tr
	if edit != nil {
		rt = editRequests{tr, edit}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// editRequests edits each request before rt sends it.
type editRequests struct {
	rt   http.RoundTripper
	edit func(*http.Request)
}

func (e editRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	e.edit(r)
	return e.rt.RoundTrip(r)
}
