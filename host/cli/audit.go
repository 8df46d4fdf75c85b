package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/audit"
)

func (e *env) auditCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Examine the audit trail in the host's database",
	}
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Verify the hash chain of the audit events; exit 1 naming the first broken sequence",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			st, err := e.openStore(c.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			r, err := audit.New(st, audit.Options{}).Verify(c.Context())
			if err != nil {
				return err
			}
			if r.CheckpointSeq > 0 {
				fmt.Fprintf(e.stdout, "%d events, chain intact (from the checkpoint after sequence %d, left by pruning)\n", r.Events, r.CheckpointSeq)
				return nil
			}
			fmt.Fprintf(e.stdout, "%d events, chain intact\n", r.Events)
			return nil
		},
	}
	cmd.AddCommand(verify)
	return cmd
}
