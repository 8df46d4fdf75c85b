package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/api"
)

// money prints millionths of a currency.
func money(micros int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", micros/1e6, micros%1e6/1e4, currency)
}

func (e *env) domainsCommand() *cobra.Command {
	r := &remote{e: e, http: &http.Client{Timeout: time.Minute}}
	cmd := &cobra.Command{
		Use:   "domains",
		Short: "Check, register, renew and lock a deployment's domain, and keep your contacts, through the API of a running `fedhost serve`",
	}
	cmd.PersistentFlags().StringVar(&r.server, "server", "", "URL of the fedhost API (env "+serverEnv+"; default http:// and the listen address of the configuration)")
	cmd.PersistentFlags().StringVar(&r.token, "token", "", "API token (env "+tokenEnv+"; make one with `fedhost users token`)")
	cmd.PersistentFlags().BoolVar(&r.json, "json", false, "print the API's JSON answer as it is")

	var registrarName string
	check := &cobra.Command{
		Use:   "check DOMAIN --registrar NAME",
		Short: "Ask a registrar whether DOMAIN is free and what one year costs",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			body, _ := json.Marshal(api.DomainCheckRequest{Registrar: registrarName, Domain: args[0]})
			var q api.DomainQuote
			if err := r.call(c.Context(), http.MethodPost, "/domains/check", body, &q); err != nil || r.json {
				return err
			}
			if !q.Available {
				fmt.Fprintf(e.stdout, "%s is not available at %s: %s\n", q.Domain, q.Registrar, q.Reason)
				return nil
			}
			fmt.Fprintf(e.stdout, "%s is available at %s for %s a year (renewal %s)\n", q.Domain, q.Registrar,
				money(q.PriceMicros, q.Currency), money(q.RenewalPriceMicros, q.Currency))
			fmt.Fprintf(e.stdout, "register it with: fedhost domains register DEPLOYMENT --registrar %s --contact ID --price %d --currency %s\n",
				q.Registrar, q.PriceMicros, q.Currency)
			return nil
		},
	}
	check.Flags().StringVar(&registrarName, "registrar", "", "the registrar to ask (GET /api/v1/registrars lists them) (required)")
	_ = check.MarkFlagRequired("registrar")

	var reg api.DomainRegisterRequest
	register := &cobra.Command{
		Use:   "register DEPLOYMENT --registrar NAME --contact ID --price MICROS --currency CUR",
		Short: "Confirm the registration of the deployment's domain at the price check quoted; the next build registers it",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			body, _ := json.Marshal(reg)
			var d api.Domain
			if err := r.call(c.Context(), http.MethodPost, "/deployments/"+url.PathEscape(args[0])+"/domain/register", body, &d); err != nil || r.json {
				return err
			}
			fmt.Fprintf(e.stdout, "%s: registration at %s for %s confirmed; the next build registers it\n", d.Name, d.Registrar, money(d.PriceMicros, d.Currency))
			return nil
		},
	}
	register.Flags().StringVar(&reg.Registrar, "registrar", "", "the registrar that quoted the price (required)")
	register.Flags().StringVar(&reg.ContactID, "contact", "", "the id of your contact that holds the domain (fedhost domains contacts) (required)")
	register.Flags().Int64Var(&reg.PriceMicros, "price", 0, "the price of one year check quoted, in millionths (required)")
	register.Flags().StringVar(&reg.Currency, "currency", "", "the currency check quoted (required)")
	register.Flags().StringVar(&reg.Domain, "domain", "", "the domain, when the deployment has none yet")
	for _, f := range []string{"registrar", "contact", "price", "currency"} {
		_ = register.MarkFlagRequired(f)
	}

	var years int
	var authCodeFile string
	renew := &cobra.Command{
		Use:   "renew DEPLOYMENT [--years N]",
		Short: "Renew the deployment's domain now",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			body, _ := json.Marshal(api.DomainRenewRequest{Years: years})
			return r.showDomain(c, http.MethodPost, args[0], "/renew", body)
		},
	}
	renew.Flags().IntVar(&years, "years", 1, "years to renew for (1 to 10)")

	lock := &cobra.Command{
		Use: "lock DEPLOYMENT", Short: "Set the transfer lock of the deployment's domain", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return r.showDomain(c, http.MethodPut, args[0], "/lock", []byte(`{"locked":true}`))
		},
	}
	unlock := &cobra.Command{
		Use: "unlock DEPLOYMENT", Short: "Lift the transfer lock of the deployment's domain", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return r.showDomain(c, http.MethodPut, args[0], "/lock", []byte(`{"locked":false}`))
		},
	}
	renewal := &cobra.Command{
		Use: "renewal DEPLOYMENT auto|manual", Short: "Set whether the daily job renews the deployment's domain", Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			body, _ := json.Marshal(api.DomainRenewalRequest{Renewal: args[1]})
			return r.showDomain(c, http.MethodPut, args[0], "/renewal", body)
		},
	}
	var tr api.DomainTransferRequest
	transfer := &cobra.Command{
		Use:   "transfer DEPLOYMENT --registrar NAME --auth-code-file FILE --price MICROS --currency CUR",
		Short: "Move the deployment's domain into the provider's account at the quoted transfer price",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			code, err := os.ReadFile(authCodeFile)
			if err != nil {
				return fmt.Errorf("--auth-code-file: %w", err)
			}
			tr.AuthCode = strings.TrimSpace(string(code))
			body, _ := json.Marshal(tr)
			return r.showDomain(c, http.MethodPost, args[0], "/transfer", body)
		},
	}
	transfer.Flags().StringVar(&tr.Registrar, "registrar", "", "the registrar to move the domain to (required)")
	transfer.Flags().StringVar(&authCodeFile, "auth-code-file", "", "a file holding the auth (EPP) code of the current registrar (required; a file keeps the code out of the shell history)")
	transfer.Flags().Int64Var(&tr.PriceMicros, "price", 0, "the transfer price check quoted, in millionths (required)")
	transfer.Flags().StringVar(&tr.Currency, "currency", "", "the currency check quoted (required)")
	transfer.Flags().StringVar(&tr.Domain, "domain", "", "the domain, when the deployment has none yet")
	for _, f := range []string{"registrar", "auth-code-file", "price", "currency"} {
		_ = transfer.MarkFlagRequired(f)
	}
	show := &cobra.Command{
		Use: "show DEPLOYMENT", Short: "Show the deployment's domain: state, registrar, expiry, lock, nameservers, DNSSEC and events", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return r.showDomain(c, http.MethodGet, args[0], "", nil)
		},
	}
	authcode := &cobra.Command{
		Use: "authcode DEPLOYMENT", Short: "Print the code that moves the deployment's domain to another registrar", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var a api.AuthCodeAnswer
			if err := r.call(c.Context(), http.MethodPost, "/deployments/"+url.PathEscape(args[0])+"/domain/authcode", nil, &a); err != nil || r.json {
				return err
			}
			fmt.Fprintln(e.stdout, a.AuthCode)
			return nil
		},
	}

	contacts := &cobra.Command{
		Use:   "contacts",
		Short: "List your contacts; `contacts add` adds one",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var cs []api.Contact
			if err := r.call(c.Context(), http.MethodGet, "/contacts", nil, &cs); err != nil || r.json {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tEMAIL\tPHONE\tCOUNTRY")
			for _, ct := range cs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ct.ID, ct.Name, ct.Email, ct.Phone, ct.Country)
			}
			return tw.Flush()
		},
	}
	var ct api.Contact
	add := &cobra.Command{
		Use:   "add --name N --email E --phone +CC... --street S --city C --postal-code P --country CC",
		Short: "Add a contact: the holder of the domains registered for you",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			body, _ := json.Marshal(ct)
			var saved api.Contact
			if err := r.call(c.Context(), http.MethodPost, "/contacts", body, &saved); err != nil || r.json {
				return err
			}
			fmt.Fprintln(e.stdout, saved.ID)
			return nil
		},
	}
	for _, f := range []struct {
		p          *string
		name, help string
	}{
		{&ct.Name, "name", "the holder's name"}, {&ct.Organization, "organization", "the holder's organization, if any"},
		{&ct.Email, "email", "one e-mail address"}, {&ct.Phone, "phone", "E.164: +4930123456"},
		{&ct.Street, "street", "street and number"}, {&ct.City, "city", "city"}, {&ct.PostalCode, "postal-code", "postal code"},
		{&ct.Country, "country", "ISO 3166-1 alpha-2 code: DE, FR, US"},
	} {
		add.Flags().StringVar(f.p, f.name, "", f.help)
	}
	contacts.AddCommand(add)
	cmd.AddCommand(check, register, transfer, renew, renewal, lock, unlock, show, authcode, contacts)
	return cmd
}

// showDomain calls a domain route of a deployment and prints the domain it answers.
func (r *remote) showDomain(c *cobra.Command, method, deployment, suffix string, body []byte) error {
	var d api.Domain
	if err := r.call(c.Context(), method, "/deployments/"+url.PathEscape(deployment)+"/domain"+suffix, body, &d); err != nil || r.json {
		return err
	}
	tw := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	expires := "-"
	if d.ExpiresAt != nil {
		expires = d.ExpiresAt.UTC().Format(time.DateOnly)
	}
	fmt.Fprintf(tw, "domain\t%s\nmode\t%s\nregistrar\t%s\nstate\t%s\nexpires\t%s\nrenewal\t%s\nlocked\t%t\ndnssec\t%t\nnameservers\t%s\n",
		d.Name, d.Mode, d.Registrar, d.State, expires, d.Renewal, d.Locked, d.DNSSEC, strings.Join(d.Nameservers, " "))
	if d.Message != "" {
		fmt.Fprintf(tw, "message\t%s\n", d.Message)
	}
	for _, ev := range d.Events {
		cost := ""
		if ev.CostMicros != 0 {
			cost = money(ev.CostMicros, ev.Currency)
		}
		fmt.Fprintf(tw, "event\t%s %s %s %s\n", ev.Time.UTC().Format(time.RFC3339), ev.Kind, cost, ev.Detail)
	}
	return tw.Flush()
}
