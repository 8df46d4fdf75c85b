package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/store"
)

// cliActor is the actor of what an administrator does with these commands:
// whoever can run them can open the database anyway.
var cliActor = audit.Actor{ID: "cli", Issuer: audit.IssuerSystem}

// openStore opens the store the configuration names, as serve does.
func (e *env) openStore(ctx context.Context) (*store.Store, error) {
	cfg, err := e.load()
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, store.Config{Database: cfg.Database, DataDir: cfg.DataDir})
}

// withAccounts runs fn with the account service of the configured store; the
// audit log is flushed before the store closes.
func (e *env) withAccounts(ctx context.Context, fn func(ctx context.Context, svc *auth.Service) error) error {
	st, err := e.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	log := audit.New(st, audit.Options{})
	ctx = audit.WithActor(ctx, cliActor)
	err = fn(ctx, auth.New(st, auth.Options{Audit: log}))
	if ferr := log.Flush(ctx); err == nil {
		err = ferr
	}
	return err
}

func (e *env) usersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Manage the operator accounts in the host's database",
	}
	var superuser bool
	create := &cobra.Command{
		Use:   "create NAME [--superuser]",
		Short: "Create a user and print its generated password, once",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return e.withAccounts(c.Context(), func(ctx context.Context, svc *auth.Service) error {
				_, password, err := svc.CreateUser(ctx, args[0], superuser)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "user %s created; its password, shown only now: %s\n", args[0], password)
				return nil
			})
		},
	}
	create.Flags().BoolVar(&superuser, "superuser", false, "the user can see and manage the deployments and audit events of all operators")

	reset := &cobra.Command{
		Use:   "reset-password NAME",
		Short: "Give a user a new generated password, print it once, and end the user's sessions",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return e.withAccounts(c.Context(), func(ctx context.Context, svc *auth.Service) error {
				password, err := svc.ResetPassword(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "new password of user %s, shown only now: %s\n", args[0], password)
				return nil
			})
		},
	}
	promote := &cobra.Command{
		Use:   "promote NAME",
		Short: "Make a user a superuser",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return e.withAccounts(c.Context(), func(ctx context.Context, svc *auth.Service) error {
				if err := svc.Promote(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "user %s is a superuser\n", args[0])
				return nil
			})
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the users",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return e.withAccounts(c.Context(), func(ctx context.Context, svc *auth.Service) error {
				users, err := svc.Users(ctx)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAME\tSUPERUSER\tDISABLED\tCREATED")
				for _, u := range users {
					fmt.Fprintf(w, "%s\t%t\t%t\t%s\n", u.Name, u.Superuser, u.Disabled, u.CreatedAt.Format("2006-01-02 15:04:05Z07:00"))
				}
				return w.Flush()
			})
		},
	}
	var tokenName string
	var days int
	token := &cobra.Command{
		Use:   "token USER [--name NAME] [--days N]",
		Short: "Make an API token for scripts (fedhost deployments --token, or Authorization: Bearer) and print it once",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return e.withAccounts(c.Context(), func(ctx context.Context, svc *auth.Service) error {
				users, err := svc.Users(ctx)
				if err != nil {
					return err
				}
				for _, u := range users {
					if u.Name != args[0] {
						continue
					}
					value, t, err := svc.NewToken(ctx, u.ID, tokenName, time.Duration(days)*24*time.Hour)
					if err != nil {
						return err
					}
					fmt.Fprintf(e.stdout, "token %q of %s, valid until %s, shown only now:\n%s\n", t.Name, u.Name, t.ExpiresAt.Format(time.DateOnly), value)
					return nil
				}
				return fmt.Errorf("no user %q: see `fedhost users list`", args[0])
			})
		},
	}
	token.Flags().StringVar(&tokenName, "name", "cli", "what the token is for")
	token.Flags().IntVar(&days, "days", 90, "lifetime in days (at most 365)")
	cmd.AddCommand(create, reset, promote, list, token)
	return cmd
}
