// Command differential holds two versions of graceguard's decisions to each
// other (make differential BASE=REF): it builds the kubectl plugin at REF
// and from the working tree, runs `mutate`, `check -o json` and `explain`
// of each on the same inputs, and reports every input on which their exit
// code, stdout or stderr differ. The plugin runs the webhook's own
// decisions (pkg/mutate), so a refactor that changes none of its answers
// here changed no admission answer for these objects either.
//
// The inputs are the repository's own (examples/ and the YAML and JSON
// under pkg/*/testdata that is not a golden file) and a generated corpus:
// Pods and Deployments, each with a random set of the annotations of
// mutate.Keys, values drawn from valid and invalid ones, hooks, grace
// periods, ports, Windows and meshes, seeded so a run can be repeated.
//
//	go -C hack run ./differential -base REF [-head REF] [-objects 3000] [-seed 1] [-ignore REGEXP]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/harness/repo"
)

func main() {
	if err := repo.Chdir(); err != nil {
		fmt.Fprintln(os.Stderr, "differential:", err)
		os.Exit(2)
	}
	base := flag.String("base", "", "the git revision to compare with (required), e.g. a commit before a refactor")
	head := flag.String("head", "", "the git revision to compare (default: the working tree)")
	objects := flag.Int("objects", 3000, "generated objects, 1 to 100000")
	seed := flag.Uint64("seed", 1, "seed of the generated corpus")
	shown := flag.Int("show", 10, "differences shown in full (all are counted)")
	ignore := flag.String("ignore", "", "a regular expression: output lines it matches are left out of the comparison (the changes a revision made on purpose)")
	flag.Parse()
	if *base == "" {
		fmt.Fprintln(os.Stderr, "differential: -base is required: the git revision to compare with, e.g. -base HEAD~3")
		os.Exit(2)
	}
	if *objects < 1 || *objects > 100000 {
		fmt.Fprintf(os.Stderr, "differential: -objects %d: want 1 to 100000\n", *objects)
		os.Exit(2)
	}
	var skip *regexp.Regexp
	if *ignore != "" {
		var err error
		if skip, err = regexp.Compile(*ignore); err != nil {
			fmt.Fprintf(os.Stderr, "differential: -ignore %q: not a regular expression: %v\n", *ignore, err)
			os.Exit(2)
		}
	}
	n, err := run(*base, *head, *objects, *seed, *shown, skip)
	if err != nil {
		fmt.Fprintln(os.Stderr, "differential:", err)
		os.Exit(2)
	}
	if n > 0 {
		os.Exit(1)
	}
}

func run(base, head string, objects int, seed uint64, shown int, skip *regexp.Regexp) (int, error) {
	tmp, err := os.MkdirTemp("", "graceguard-differential-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	baseBin, err := buildAt(base, tmp, "base")
	if err != nil {
		return 0, err
	}
	headBin := filepath.Join(tmp, "head")
	if head == "" {
		err = goBuild(".", headBin)
	} else {
		headBin, err = buildAt(head, tmp, "head")
	}
	if err != nil {
		return 0, err
	}
	inputs, err := repoInputs()
	if err != nil {
		return 0, err
	}
	gen, err := generate(filepath.Join(tmp, "corpus"), objects, seed)
	if err != nil {
		return 0, err
	}
	inputs = append(inputs, gen...)
	commands := [][]string{{"mutate"}, {"check", "-o", "json"}, {"explain"}}
	var differ, reordered []string
	for _, in := range inputs {
		for _, c := range commands {
			args := append(slices.Clone(c), "-f", in)
			a, b := runPlugin(baseBin, args).without(skip), runPlugin(headBin, args).without(skip)
			if a == b {
				continue
			}
			run := strings.Join(args, " ")
			if a.sorted() == b.sorted() {
				reordered = append(reordered, run)
				continue
			}
			differ = append(differ, run)
			if len(differ) <= shown {
				fmt.Printf("--- differs: kubectl graceguard %s\n%s\n", run, diff(tmp, a, b))
			}
		}
	}
	fmt.Printf("%d inputs (%d from the repository, %d generated files of %d objects, seed %d), %d commands each, %s against %s:\n",
		len(inputs), len(inputs)-len(gen), len(gen), objects, seed, len(commands), orTree(head), base)
	fmt.Printf("%d runs give the same lines in another order\n", len(reordered))
	for _, d := range reordered {
		fmt.Println("  ", d)
	}
	fmt.Printf("%d runs differ otherwise\n", len(differ))
	for _, d := range differ {
		fmt.Println("  ", d)
	}
	return len(differ) + len(reordered), nil
}

func orTree(head string) string {
	if head == "" {
		return "the working tree"
	}
	return head
}

// buildAt builds the plugin of a revision in a detached worktree.
func buildAt(rev, tmp, name string) (string, error) {
	dir := filepath.Join(tmp, name+"-src")
	if out, err := exec.Command("git", "worktree", "add", "--detach", dir, rev).CombinedOutput(); err != nil {
		return "", fmt.Errorf("git worktree add %s: %v: %s", rev, err, out)
	}
	defer exec.Command("git", "worktree", "remove", "--force", dir).Run()
	bin := filepath.Join(tmp, name)
	return bin, goBuild(dir, bin)
}

func goBuild(dir, out string) error {
	cmd := exec.Command("go", "build", "-o", out, "./cmd/kubectl-graceguard")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %v: %s", dir, err, b)
	}
	return nil
}

// result is what a user sees of one run.
type result struct{ code, stdout, stderr string }

// without is r without the output lines skip matches.
func (r result) without(skip *regexp.Regexp) result {
	if skip == nil {
		return r
	}
	drop := func(s string) string {
		l := strings.Split(s, "\n")
		return strings.Join(slices.DeleteFunc(l, skip.MatchString), "\n")
	}
	return result{r.code, drop(r.stdout), drop(r.stderr)}
}

// sorted is r with the lines of its outputs sorted: two runs that differ
// only in the order of their findings are equal sorted.
func (r result) sorted() result {
	sortLines := func(s string) string {
		l := strings.Split(s, "\n")
		slices.Sort(l)
		return strings.Join(l, "\n")
	}
	return result{r.code, sortLines(r.stdout), sortLines(r.stderr)}
}

func runPlugin(bin string, args []string) result {
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := "0"
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = fmt.Sprint(ee.ExitCode())
		} else {
			code = err.Error()
		}
	}
	return result{code, out.String(), errOut.String()}
}

func diff(tmp string, a, b result) string {
	var s strings.Builder
	if a.code != b.code {
		fmt.Fprintf(&s, "exit code %s -> %s\n", a.code, b.code)
	}
	for _, p := range []struct{ name, a, b string }{{"stdout", a.stdout, b.stdout}, {"stderr", a.stderr, b.stderr}} {
		if p.a == p.b {
			continue
		}
		fa, fb := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
		os.WriteFile(fa, []byte(p.a), 0o600)
		os.WriteFile(fb, []byte(p.b), 0o600)
		out, _ := exec.Command("diff", "-u", "--label", p.name+" base", "--label", p.name+" head", fa, fb).Output()
		lines := strings.SplitAfter(string(out), "\n")
		if len(lines) > 40 {
			lines = append(lines[:40], fmt.Sprintf("... %d more lines\n", len(lines)-40))
		}
		s.WriteString(strings.Join(lines, ""))
	}
	return s.String()
}

// repoInputs are the manifests the repository keeps as test inputs.
func repoInputs() ([]string, error) {
	var out []string
	for _, root := range []string{"examples", "pkg/mutate/testdata", "pkg/cli/testdata"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "golden" {
					return filepath.SkipDir
				}
				return nil
			}
			ext := filepath.Ext(p)
			if (ext == ".yaml" || ext == ".yml" || ext == ".json") && !strings.Contains(filepath.Base(p), ".golden.") {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// values are drawn for every annotation: valid and invalid ones of each
// kind graceguard parses.
var values = []string{
	"", "0", "0s", "1s", "5s", "10", "30s", "90s", "1m", "1m30s", "15m", "2h", "-1s", "1.5s", "banana", "auto",
	"true", "false", "enabled", "disabled", "exec", "sleep", "none", "app", "app,proxy", "nope",
	"8080", "http", "99999", "/healthz", "healthz", "enforce", "warn",
	"sidecar-2s", "gke-neg", "aws-alb", "istio", "nginx", "default",
}

// generate writes n objects, 50 to a file, and returns the files.
func generate(dir string, n int, seed uint64) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x67726163))
	var keys []string
	for _, k := range mutate.Keys {
		if k.Where&mutate.PodAnnotation != 0 {
			keys = append(keys, k.Name)
		}
	}
	slices.Sort(keys)
	var files []string
	var buf bytes.Buffer
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		f := filepath.Join(dir, fmt.Sprintf("gen-%05d.yaml", len(files)))
		files = append(files, f)
		err := os.WriteFile(f, buf.Bytes(), 0o644)
		buf.Reset()
		return err
	}
	for i := range n {
		b, err := yaml.Marshal(object(r, i, keys))
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(b)
		if (i+1)%50 == 0 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	return files, flush()
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// object is one Pod or Deployment with random settings.
func object(r *rand.Rand, i int, keys []string) map[string]any {
	ann := map[string]any{}
	for range r.IntN(5) {
		ann[pick(r, keys)] = pick(r, values)
	}
	spec := map[string]any{"containers": containers(r)}
	switch r.IntN(5) {
	case 0:
		spec["terminationGracePeriodSeconds"] = 0
	case 1:
		spec["terminationGracePeriodSeconds"] = pick(r, []int{1, 15, 30, 60, 300, 3600})
	}
	if r.IntN(10) == 0 {
		spec["os"] = map[string]any{"name": "windows"}
	}
	if r.IntN(8) == 0 {
		spec["initContainers"] = []any{map[string]any{"name": "proxy", "image": "proxy:1", "restartPolicy": "Always"}}
	}
	meta := map[string]any{"name": fmt.Sprintf("o%d", i)}
	if len(ann) > 0 {
		meta["annotations"] = ann
	}
	if r.IntN(2) == 0 {
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
	}
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": meta["name"]},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": meta["name"]}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": meta["name"]}, "annotations": ann}, "spec": spec},
		}}
}

func containers(r *rand.Rand) []any {
	var out []any
	for j := range 1 + r.IntN(3) {
		c := map[string]any{"name": pick(r, []string{"app", "proxy", "worker"}) + fmt.Sprint(j), "image": pick(r, []string{"app:1", "gcr.io/distroless/static", "nginx:1.27"})}
		if j == 0 && r.IntN(3) == 0 {
			c["name"] = "app"
		}
		if r.IntN(2) == 0 {
			c["ports"] = []any{map[string]any{"containerPort": pick(r, []int{80, 8080, 9090}), "name": "http"}}
		}
		switch r.IntN(6) {
		case 0:
			c["lifecycle"] = map[string]any{"preStop": map[string]any{"exec": map[string]any{"command": []any{"sleep", fmt.Sprint(pick(r, []int{1, 5, 20, 40, 120}))}}}}
		case 1:
			c["lifecycle"] = map[string]any{"preStop": map[string]any{"sleep": map[string]any{"seconds": pick(r, []int{1, 5, 20, 40})}}}
		case 2:
			c["lifecycle"] = map[string]any{"preStop": map[string]any{"exec": map[string]any{"command": []any{"sh", "-c", "sleep 10; /drain"}}}}
		}
		if r.IntN(4) == 0 {
			c["readinessProbe"] = map[string]any{"httpGet": map[string]any{"path": "/ready", "port": 8080}}
		}
		out = append(out, c)
	}
	return out
}
