package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/graceguard/graceguard/internal/chart"
)

func main() {
	vals := map[string]any{}
	if len(os.Args) > 1 && os.Args[1] == "warn" {
		vals = map[string]any{"config": map[string]any{"defaultMode": "warn"}}
	}
	m, err := chart.Render("graceguard", "graceguard-system", vals)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for _, doc := range strings.Split(m, "\n---\n") {
		if strings.Contains(doc, "WebhookConfiguration") {
			fmt.Println("---\n" + doc)
		}
	}
}
