package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/itchyny/gojq"
	"sigs.k8s.io/yaml"
)

// TestCIRecipes runs the CI jobs of docs/ci.md, as written, on a
// repository of realistic manifests: the YAML parses, the plugin commands
// run with their flags, the SARIF has what GitHub's upload needs, the jq
// program of the GitLab job (run with gojq) makes a Code Quality report,
// and the gate fails on a denial and passes without.
func TestCIRecipes(t *testing.T) {
	doc := fixture(t, "../../docs/ci.md")
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1)
	if len(blocks) != 2 {
		t.Fatalf("want the GitHub and the GitLab job in docs/ci.md, found %d YAML blocks", len(blocks))
	}
	var github struct {
		Permissions map[string]string `json:"permissions"`
		Jobs        map[string]struct {
			Steps []struct {
				Name string            `json:"name"`
				Uses string            `json:"uses"`
				Run  string            `json:"run"`
				With map[string]string `json:"with"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal([]byte(blocks[0][1]), &github); err != nil {
		t.Fatalf("the GitHub workflow: %v", err)
	}
	var gitlab map[string]struct {
		Image        string   `json:"image"`
		Stage        string   `json:"stage"`
		BeforeScript []string `json:"before_script"`
		Script       []string `json:"script"`
		Artifacts    struct {
			When    string            `json:"when"`
			Paths   []string          `json:"paths"`
			Reports map[string]string `json:"reports"`
		} `json:"artifacts"`
	}
	if err := yaml.Unmarshal([]byte(blocks[1][1]), &gitlab); err != nil {
		t.Fatalf("the GitLab job: %v", err)
	}
	if github.Permissions["security-events"] != "write" {
		t.Errorf("uploading SARIF needs security-events: write")
	}
	var commands []string
	uploaded := ""
	for _, s := range github.Jobs["check"].Steps {
		if strings.HasPrefix(s.Uses, "github/codeql-action/upload-sarif@") {
			uploaded = s.With["sarif_file"]
		}
		if strings.HasPrefix(s.Run, "kubectl-graceguard check -R") {
			commands = append(commands, s.Run)
		}
	}
	job := gitlab["graceguard"]
	var jq string
	for _, s := range job.Script {
		switch {
		case strings.HasPrefix(s, "kubectl-graceguard "):
			commands = append(commands, s)
		case strings.HasPrefix(s, "jq "):
			jq = s
		}
	}
	if uploaded != "graceguard.sarif" || len(commands) != 4 || jq == "" || job.Artifacts.Reports["codequality"] != "gl-code-quality-report.json" {
		t.Fatalf("upload %q, commands %q, jq %q, reports %v", uploaded, commands, jq, job.Artifacts.Reports)
	}

	// A repository: the realistic fixtures, plus one Pod graceguard denies.
	fixtures, _ := filepath.Glob(filepath.Join(mustAbs(t, "../manifest/testdata"), "*.yaml"))
	fixtures = append(fixtures, mustAbs(t, "../mutate/testdata/pod-every-problem-at-once.yaml"))
	t.Chdir(t.TempDir())
	for _, f := range fixtures {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll("deploy", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("deploy", filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runAll := func() map[string]int {
		codes := map[string]int{}
		for _, c := range commands {
			args, redirect, _ := strings.Cut(c, ">")
			args = strings.TrimSpace(args)
			if i := strings.Index(args, "#"); i >= 0 {
				args = strings.TrimSpace(args[:i])
			}
			code, out, stderr := run(t, "", strings.Fields(args)[1:]...)
			if code == ExitUsage {
				t.Fatalf("%s: exit 2: %s", c, stderr)
			}
			codes[c] = code
			if f := strings.Fields(redirect); len(f) > 0 {
				if err := os.WriteFile(f[0], []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		return codes
	}
	codes := runAll()
	gate := commands[len(commands)-1]
	if codes[commands[0]] != ExitFindings || codes[gate] != ExitFindings {
		t.Errorf("with a denial in deploy/, the gates must exit 1: %v", codes)
	}

	// What GitHub needs of each result.
	var sarif struct {
		Runs []struct {
			Results []struct {
				RuleID  string `json:"ruleId"`
				Message struct {
					Text string `json:"text"`
				} `json:"message"`
				Locations []struct {
					Physical struct {
						Artifact struct {
							URI string `json:"uri"`
						} `json:"artifactLocation"`
						Region struct {
							StartLine int `json:"startLine"`
						} `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(fixture(t, "graceguard.sarif")), &sarif); err != nil {
		t.Fatal(err)
	}
	results := sarif.Runs[0].Results
	if len(results) < 10 {
		t.Fatalf("only %d results", len(results))
	}
	for _, r := range results {
		loc := r.Locations[0].Physical
		lines := strings.Split(fixture(t, loc.Artifact.URI), "\n")
		if r.RuleID == "" || r.Message.Text == "" || !strings.HasPrefix(loc.Artifact.URI, "deploy/") ||
			loc.Region.StartLine < 1 || loc.Region.StartLine > len(lines) {
			t.Errorf("result %+v", r)
		}
	}

	// The GitLab job's jq program, with gojq.
	prog := jq[strings.Index(jq, "'")+1 : strings.LastIndex(jq, "'")]
	query, err := gojq.Parse(prog)
	if err != nil {
		t.Fatalf("the jq program does not parse: %v", err)
	}
	var report any
	if err := json.Unmarshal([]byte(fixture(t, "graceguard.json")), &report); err != nil {
		t.Fatal(err)
	}
	v, ok := query.Run(report).Next()
	if !ok {
		t.Fatal("jq produced nothing")
	}
	if err, isErr := v.(error); isErr {
		t.Fatal(err)
	}
	entries, _ := v.([]any)
	if len(entries) != len(results) {
		t.Errorf("%d Code Quality entries for %d findings", len(entries), len(results))
	}
	seen := map[string]bool{}
	for _, e := range entries {
		m := e.(map[string]any)
		loc := m["location"].(map[string]any)
		fp := m["fingerprint"].(string)
		if seen[fp] {
			t.Errorf("fingerprint %q twice: GitLab would merge the findings", fp)
		}
		seen[fp] = true
		if _, err := os.Stat(loc["path"].(string)); err != nil || loc["lines"].(map[string]any)["begin"].(float64) < 1 || m["description"] == "" {
			t.Errorf("entry %v", m)
		}
	}

	// Without the denied Pod, the gate passes.
	if err := os.Remove("deploy/pod-every-problem-at-once.yaml"); err != nil {
		t.Fatal(err)
	}
	if codes := runAll(); codes[gate] != ExitOK || codes[commands[0]] != ExitOK {
		t.Errorf("without a denial the gates must pass: %v", codes)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
