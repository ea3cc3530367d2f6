package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newAuditCmd() *cobra.Command {
	return &cobra.Command{Use: "audit", Hidden: true, RunE: func(*cobra.Command, []string) error { return errors.New("WIP") }}
}
