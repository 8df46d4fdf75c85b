package cli

import (
	"context"
	"errors"
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
		Short: "Give a user a new generated password to change at the next sign-in, print it once, end the user's sessions and revoke its API tokens",
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
	demote := e.userChange("demote NAME", "Make a superuser an operator again (not the last active superuser)", "user %s is an operator",
		func(ctx context.Context, svc *auth.Service, name string) error { return svc.Demote(ctx, name) })
	disable := e.userChange("disable NAME", "Disable a user: it can no longer sign in, its sessions end and its API tokens are revoked", "user %s is disabled",
		func(ctx context.Context, svc *auth.Service, name string) error {
			return svc.SetDisabled(ctx, name, true)
		})
	enable := e.userChange("enable NAME", "Enable a disabled user again (tokens revoked when it was disabled stay revoked)", "user %s is enabled",
		func(ctx context.Context, svc *auth.Service, name string) error {
			return svc.SetDisabled(ctx, name, false)
		})
	del := e.userChange("delete NAME", "Delete a user with its sessions and tokens; refused while it owns deployments that are not destroyed", "user %s is deleted",
		func(ctx context.Context, svc *auth.Service, name string) error { return svc.DeleteUser(ctx, name) })
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
				fmt.Fprintln(w, "NAME\tSUPERUSER\tDISABLED\tMUST CHANGE PASSWORD\tCREATED")
				for _, u := range users {
					fmt.Fprintf(w, "%s\t%t\t%t\t%t\t%s\n", u.Name, u.Superuser, u.Disabled, u.MustChangePassword, u.CreatedAt.Format("2006-01-02 15:04:05Z07:00"))
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
				u, err := userNamed(ctx, svc, args[0])
				if err != nil {
					return err
				}
				value, t, err := svc.NewToken(ctx, u.ID, tokenName, time.Duration(days)*24*time.Hour)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "token %q of %s, valid until %s, shown only now:\n%s\n", t.Name, u.Name, t.ExpiresAt.Format(time.DateOnly), value)
				return nil
			})
		},
	}
	token.Flags().StringVar(&tokenName, "name", "cli", "what the token is for")
	token.Flags().IntVar(&days, "days", 90, "lifetime in days (at most 365)")
	tokens := &cobra.Command{
		Use:   "tokens USER",
		Short: "List a user's API tokens: id, name, created, expires, last used; never their values",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return e.withAccounts(c.Context(), func(ctx context.Context, svc *auth.Service) error {
				u, err := userNamed(ctx, svc, args[0])
				if err != nil {
					return err
				}
				list, err := svc.Tokens(ctx, u.ID)
				if err != nil {
					return err
				}
				const at = "2006-01-02 15:04Z07:00"
				w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tNAME\tCREATED\tEXPIRES\tLAST USED")
				for _, t := range list {
					used := "never"
					if t.LastUsedAt != nil {
						used = t.LastUsedAt.Format(at)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.Format(at), t.ExpiresAt.Format(at), used)
				}
				return w.Flush()
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke-token ID",
		Short: "Revoke an API token by its id (of `fedhost users tokens`): it is refused from the next request on",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return e.withAccounts(c.Context(), func(ctx context.Context, svc *auth.Service) error {
				if err := svc.RevokeToken(ctx, args[0]); errors.Is(err, store.ErrNotFound) {
					return errors.New("no API token with this id: see `fedhost users tokens USER`")
				} else if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "token %s is revoked\n", args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(create, reset, promote, demote, disable, enable, del, list, token, tokens, revoke)
	return cmd
}

// userChange is a command that changes the user its one argument names and says so.
func (e *env) userChange(use, short, done string, change func(ctx context.Context, svc *auth.Service, name string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return e.withAccounts(c.Context(), func(ctx context.Context, svc *auth.Service) error {
				err := change(ctx, svc, args[0])
				switch {
				case errors.Is(err, store.ErrNotFound):
					return fmt.Errorf("no user %q: see `fedhost users list`", args[0])
				case errors.Is(err, store.ErrLastSuperuser):
					return fmt.Errorf("user %s is the last active superuser: promote another user first (`fedhost users promote NAME`)", args[0])
				case err != nil:
					return err
				}
				fmt.Fprintf(e.stdout, done+"\n", args[0])
				return nil
			})
		},
	}
}

// userNamed returns the user called name.
func userNamed(ctx context.Context, svc *auth.Service, name string) (auth.User, error) {
	u, err := svc.UserNamed(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return auth.User{}, fmt.Errorf("no user %q: see `fedhost users list`", name)
	}
	return u, err
}
