// Package repo puts hack's programs at the repository root. They live in a
// module of their own (hack/go.mod), so `go -C hack run ./dist` starts them
// in hack/; every path they take or write is relative to the root.
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

// Chdir changes the working directory to the repository root: the nearest
// directory at or above it whose go.mod declares ModulePath.
func Chdir() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for {
		if declares(filepath.Join(dir, "go.mod")) {
			return os.Chdir(dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return errors.New("run inside the graceguard repository: no go.mod of " + ModulePath + " at or above the working directory")
		}
		dir = parent
	}
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
