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
	var preview, transfer bool
	var name, namespace string
	var tr api.ImportTransfer
	cmd := &cobra.Command{
		Use:   "import [--preview] [--namespace NS] [--name NAME] [--transfer --price MICROS --currency CUR [--contact ID] [--registrar NAME]] < FILE",
		Short: "Import a deployment from another fedhost with the migration string its export answered (read from stdin)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !transfer {
				for _, f := range []string{"price", "currency", "contact", "registrar"} {
					if c.Flags().Changed(f) {
						return fmt.Errorf("--%s confirms the domain's transfer: give --transfer too", f)
					}
				}
			}
			raw, err := io.ReadAll(io.LimitReader(c.InOrStdin(), migration.MaxLen+1))
			if err != nil {
				return fmt.Errorf("reading the migration string from stdin: %w", err)
			}
			s := strings.TrimSpace(string(raw))
			if s == "" {
				return fmt.Errorf("give the migration string on stdin: fedhost deployments import < FILE")
			}
			req := api.ImportRequest{Migration: s, Preview: preview, Name: name, Namespace: namespace}
			if transfer {
				req.Transfer = &tr
			}
			body, err := json.Marshal(req)
			if err != nil {
				return err
			}
			return r.importDeployment(c.Context(), body, preview)
		},
	}
	cmd.Flags().BoolVar(&preview, "preview", false, "show what the import would make, storing nothing")
	cmd.Flags().StringVar(&namespace, "namespace", "", "the deployment's namespace here (default: the source's)")
	cmd.Flags().StringVar(&name, "name", "", "the deployment's name here (default: the source's)")
	cmd.Flags().BoolVar(&transfer, "transfer", false, "confirm the transfer of the domain the preview quoted: the first build transfers it to this fedhost's registrar with the string's auth code (without it, you delegate the domain)")
	cmd.Flags().Int64Var(&tr.PriceMicros, "price", 0, "with --transfer: the transfer price the preview quoted, in millionths")
	cmd.Flags().StringVar(&tr.Currency, "currency", "", "with --transfer: the currency the preview quoted")
	cmd.Flags().StringVar(&tr.ContactID, "contact", "", "with --transfer: the id of your contact that holds the domain (default: the preview's, your first; fedhost domains contacts lists them)")
	cmd.Flags().StringVar(&tr.Registrar, "registrar", "", "with --transfer: the registrar to transfer the domain to (default: the preview's)")
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
	switch dom := plan.Domain; dom.Action {
	case "transfer":
		printTransfer(w, dom, preview)
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

// printTransfer says what becomes of a domain the import can transfer: the quote and the
// flags that confirm it, or that the first build transfers it.
func printTransfer(w io.Writer, dom deploy.ImportedDomain, preview bool) {
	holder := "the registrar account's own contact (add yours with fedhost domains contacts add)"
	if dom.ContactID != "" {
		holder = fmt.Sprintf("%s (contact %s)", dom.Contact, dom.ContactID)
	}
	switch {
	case dom.Confirmed:
		fmt.Fprintf(w, "domain %s: transferred to registrar %s for %s, held by %s, by the first build after the restore and the users\n",
			dom.Name, dom.Registrar, money(dom.PriceMicros, dom.Currency), holder)
	case dom.QuoteError != "":
		fmt.Fprintf(w, "domain %s: registrar %s quoted no transfer price (%s): preview again to transfer it, or delegate it\n", dom.Name, dom.Registrar, dom.QuoteError)
	case preview:
		fmt.Fprintf(w, "domain %s: can be transferred to registrar %s for %s, held by %s\n", dom.Name, dom.Registrar, money(dom.PriceMicros, dom.Currency), holder)
		contact := ""
		if dom.ContactID != "" {
			contact = " --contact " + dom.ContactID
		}
		fmt.Fprintf(w, "transfer it with: fedhost deployments import --transfer --price %d --currency %s%s < FILE (without --transfer, you delegate it)\n",
			dom.PriceMicros, dom.Currency, contact)
	default:
		fmt.Fprintf(w, "domain %s: not transferred (no --transfer): point its nameservers here (GET /api/v1/deployments/{id}/domain says which)\n", dom.Name)
	}
}
