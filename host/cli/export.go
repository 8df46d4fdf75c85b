package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/api"
)

// exportTimeout bounds the export call: it answers when the export build ends (the nodes
// stopped, each app's final backup taken), which may take long for much data.
const exportTimeout = 35 * time.Minute

func (r *remote) exportCommand() *cobra.Command {
	var target, recipient string
	cmd := &cobra.Command{
		Use:   "export ID --target URL | --recipient RECIPIENT",
		Short: "Export a deployment to another fedhost: stops it, takes a final backup and prints the migration string, once",
		Long: "Export releases the domain when this host's registrar holds it, stops the deployment's nodes, takes a final " +
			"backup of each app, makes read-only keys to the backups and marks the deployment exported. It prints the " +
			"migration string, encrypted to the target: it is kept nowhere and is not shown again. Import it at the target " +
			"(fedhost deployments import there). Resume the deployment here to bring it back until the target confirms the import.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if (target == "") == (recipient == "") {
				return errors.New("give one of --target (the other fedhost's URL) and --recipient (its age1pq1... recipient)")
			}
			body, _ := json.Marshal(api.ExportRequest{Target: target, Recipient: recipient})
			return r.export(c.Context(), args[0], body)
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "the target fedhost's URL, asked for its recipient")
	cmd.Flags().StringVar(&recipient, "recipient", "", "the target's recipient, as its GET /api/v1/migration/recipient gives it")
	return cmd
}

func (r *remote) export(ctx context.Context, id string, body []byte) error {
	long := *r
	long.http = &http.Client{Timeout: exportTimeout}
	path := "/deployments/" + url.PathEscape(id) + "/export"
	raw, err := long.fetch(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	var x api.ExportAnswer
	if err := decode(http.MethodPost, path, raw, &x); err != nil {
		return err
	}
	if x.Warning != "" {
		fmt.Fprintln(r.e.stderr, "warning: "+x.Warning)
	}
	if r.json {
		r.printRaw(raw)
		return nil
	}
	fmt.Fprintf(r.e.stderr, "deployment %s exported (build %s); the string below is valid until %s and is not shown again:\n",
		id, x.Build, x.ExpiresAt.Format(time.RFC3339))
	fmt.Fprintln(r.e.stdout, x.Migration)
	return nil
}
