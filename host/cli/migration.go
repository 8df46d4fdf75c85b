package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/migration"
)

// importCommand is `fedhost deployments import`: the migration string comes on stdin,
// never as an argument, which every user of the machine could read in the process list.
func (r *remote) importCommand() *cobra.Command {
	var preview bool
	var name, namespace string
	cmd := &cobra.Command{
		Use:   "import [--preview] [--namespace NS] [--name NAME] < FILE",
		Short: "Import a deployment from another fedhost with the migration string its export answered (read from stdin)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			raw, err := io.ReadAll(io.LimitReader(c.InOrStdin(), migration.MaxLen+1))
			if err != nil {
				return fmt.Errorf("reading the migration string from stdin: %w", err)
			}
			s := strings.TrimSpace(string(raw))
			if s == "" {
				return fmt.Errorf("give the migration string on stdin: fedhost deployments import < FILE")
			}
			body, err := json.Marshal(api.ImportRequest{Migration: s, Preview: preview, Name: name, Namespace: namespace})
			if err != nil {
				return err
			}
			return r.importDeployment(c.Context(), body, preview)
		},
	}
	cmd.Flags().BoolVar(&preview, "preview", false, "show what the import would make, storing nothing")
	cmd.Flags().StringVar(&namespace, "namespace", "", "the deployment's namespace here (default: the source's)")
	cmd.Flags().StringVar(&name, "name", "", "the deployment's name here (default: the source's)")
	return cmd
}

func (r *remote) importDeployment(ctx context.Context, body []byte, preview bool) error {
	const path = "/deployments/import"
	raw, err := r.fetch(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	var plan deploy.ImportPlan
	if err := decode(http.MethodPost, path, raw, &plan); err != nil {
		return err
	}
	for _, u := range plan.Unmigrated {
		fmt.Fprintf(r.e.stderr, "fedhost: warning: app %s: the value at %s stays there, not moved to %s: %s\n", u.App, u.From, u.To, u.Reason)
	}
	if r.json {
		r.printRaw(raw)
		return nil
	}
	w := r.e.stdout
	fmt.Fprintf(w, "migration %s from %s: deployment %q, namespace %s\n", plan.Migration, plan.Source, plan.Name, plan.Namespace)
	for _, a := range plan.Apps {
		data := ""
		if a.Data {
			data = ", data restored from the source's final backup"
		}
		fmt.Fprintf(w, "app %s %s -> %s%s\n", a.App, a.From, a.To, data)
	}
	for _, rn := range plan.Renames {
		fmt.Fprintf(w, "app %s: option %s renamed %s\n", rn.App, rn.From, rn.To)
	}
	fmt.Fprintf(w, "directory: %d users, %d groups (with their passwords)\n", plan.Users, plan.Groups)
	switch plan.Domain.Action {
	case "transfer":
		fmt.Fprintf(w, "domain %s: transferred through registrar %s\n", plan.Domain.Name, plan.Domain.Registrar)
	case "delegate":
		fmt.Fprintf(w, "domain %s: point its nameservers here (GET /api/v1/deployments/{id}/domain says which)\n", plan.Domain.Name)
	}
	if preview {
		fmt.Fprintln(w, "preview: nothing was stored")
		return nil
	}
	fmt.Fprintf(w, "deployment %s, build %s queued\n", plan.Deployment, plan.Build)
	return nil
}
