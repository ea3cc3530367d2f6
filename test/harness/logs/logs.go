// Package logs reads the end of a process's log for error messages.
package logs

import (
	"io"
	"os"
	"strings"
)

// maxRead is how much of a log's end Tail reads at most.
const maxRead = 64 << 10

// Tail returns the last n lines of the file at path (of its last 64 KiB at
// most), or "" when it cannot be read.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > maxRead {
		_, _ = f.Seek(fi.Size()-maxRead, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return LastLines(string(b), n)
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
