// Package repo finds graceguard's repository root: the nearest directory at
// or above the working directory whose go.mod declares the product's
// module. The lab (test/) and hack's programs live in modules of their own,
// so `go -C hack run ./dist` starts in hack/ and a test starts in its
// package's directory; the paths they take or write are the root's.
package repo

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// ModulePath is the product's module, whose go.mod marks the root.
const ModulePath = "github.com/graceguard/graceguard"

// Root returns the repository root above the working directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if declares(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run inside the graceguard repository: no go.mod of " + ModulePath + " at or above the working directory")
		}
		dir = parent
	}
}

// Chdir changes the working directory to Root.
func Chdir() error {
	root, err := Root()
	if err != nil {
		return err
	}
	return os.Chdir(root)
}

func declares(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) == 2 && f[0] == "module" {
			return f[1] == ModulePath
		}
	}
	return false
}
