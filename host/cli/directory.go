package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedhost/fedhost/host/api"
)

// directoryUsersCommand is `fedhost deployments users`: the users of a deployment's
// directory, through the API.
func (r *remote) directoryUsersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "List, add, disable, enable, delete and reset the users of a deployment's directory, and their groups",
	}
	path := func(id string, rest ...string) string {
		p := "/deployments/" + url.PathEscape(id) + "/users"
		for _, s := range rest {
			p += "/" + url.PathEscape(s)
		}
		return p
	}
	var add api.NewDirectoryUser
	addCmd := &cobra.Command{
		Use:   "add ID NAME [--display-name TEXT] [--email ADDRESS] [--group GROUP]...",
		Short: "Add a user, with no password, and mail them (or print) the one-time invitation link by which they set one",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			add.Name = args[1]
			body, _ := json.Marshal(add)
			var answer api.NewUserAnswer
			if err := r.call(c.Context(), http.MethodPost, path(args[0]), body, &answer); err != nil || r.json {
				return err
			}
			r.printLink(answer.Link)
			return nil
		},
	}
	addCmd.Flags().StringVar(&add.DisplayName, "display-name", "", "the name apps show (default: NAME)")
	addCmd.Flags().StringVar(&add.Email, "email", "", "the user's e-mail address")
	addCmd.Flags().StringArrayVar(&add.Groups, "group", nil, "a group to put the user in (repeat for several; `groups ID` lists them)")

	change := func(use, short, method, suffix string) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID NAME",
			Short: short,
			Args:  cobra.ExactArgs(2),
			RunE: func(c *cobra.Command, args []string) error {
				var u api.DirectoryUser
				if err := r.call(c.Context(), method, path(args[0], args[1])+suffix, nil, &u); err != nil || r.json {
					return err
				}
				return r.printUsers([]api.DirectoryUser{u})
			},
		}
	}
	var join, leave []string
	groupsCmd := &cobra.Command{
		Use:   "groups ID [NAME --add GROUP... --remove GROUP...]",
		Short: "List the directory's groups with what each gives in which app; with NAME, put the user in and take them out of groups",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				if len(join)+len(leave) > 0 {
					return fmt.Errorf("--add and --remove need the user's NAME after the deployment's ID")
				}
				return r.directoryGroups(c.Context(), args[0])
			}
			if len(join)+len(leave) == 0 {
				return fmt.Errorf("name the groups to change with --add GROUP or --remove GROUP")
			}
			var u api.DirectoryUser
			for _, g := range join {
				if err := r.call(c.Context(), http.MethodPut, path(args[0], args[1], "groups", g), nil, &u); err != nil {
					return err
				}
			}
			for _, g := range leave {
				if err := r.call(c.Context(), http.MethodDelete, path(args[0], args[1], "groups", g), nil, &u); err != nil {
					return err
				}
			}
			if r.json {
				return nil
			}
			return r.printUsers([]api.DirectoryUser{u})
		},
	}
	groupsCmd.Flags().StringArrayVar(&join, "add", nil, "a group to put the user in (repeat for several)")
	groupsCmd.Flags().StringArrayVar(&leave, "remove", nil, "a group to take the user out of (repeat for several)")

	cmd.AddCommand(
		&cobra.Command{
			Use:   "list ID",
			Short: "List the users of a deployment's directory with their groups",
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				var users []api.DirectoryUser
				if err := r.call(c.Context(), http.MethodGet, path(args[0]), nil, &users); err != nil || r.json {
					return err
				}
				return r.printUsers(users)
			},
		},
		addCmd,
		change("disable", "Disable a user: the directory refuses their sign-in until enabled", http.MethodPost, "/disable"),
		change("enable", "Enable a disabled user again", http.MethodPost, "/enable"),
		&cobra.Command{
			Use:   "delete ID NAME",
			Short: "Delete a user, out of every group",
			Args:  cobra.ExactArgs(2),
			RunE: func(c *cobra.Command, args []string) error {
				_, err := r.fetch(c.Context(), http.MethodDelete, path(args[0], args[1]), nil)
				return err
			},
		},
		&cobra.Command{
			Use:   "reset ID NAME",
			Short: "Mail (or print) a new one-time link by which the user sets a new password; an earlier link stops working",
			Args:  cobra.ExactArgs(2),
			RunE: func(c *cobra.Command, args []string) error {
				var link api.PasswordLink
				if err := r.call(c.Context(), http.MethodPost, path(args[0], args[1])+"/reset", nil, &link); err != nil || r.json {
					return err
				}
				r.printLink(link)
				return nil
			},
		},
		groupsCmd,
	)
	return cmd
}

// printLink says where a new link was mailed or shows it: this is the only time anybody
// sees it.
func (r *remote) printLink(l api.PasswordLink) {
	if l.SentTo != "" {
		fmt.Fprintf(r.e.stdout, "The link was sent to %s (it works once, until %s).\n", l.SentTo, l.ExpiresAt.Format(time.RFC3339))
		return
	}
	if l.MailError != "" {
		fmt.Fprintf(r.e.stdout, "The link could not be mailed: %s\n", l.MailError)
	}
	fmt.Fprintf(r.e.stdout, "Give the user this link (it works once, until %s; it is not shown again):\n%s\n", l.ExpiresAt.Format(time.RFC3339), l.URL)
}

func (r *remote) printUsers(users []api.DirectoryUser) error {
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tDISPLAY NAME\tEMAIL\tSTATE\tGROUPS")
	for _, u := range users {
		state := "enabled"
		switch {
		case u.Disabled:
			state = "disabled"
		case u.PendingLink != nil && u.PendingLink.Purpose == "invitation":
			state = "invited"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", u.Name, orDash(u.DisplayName), orDash(u.Email), state, orDash(strings.Join(u.Groups, ",")))
	}
	return w.Flush()
}

func (r *remote) directoryGroups(ctx context.Context, id string) error {
	var groups []api.DirectoryGroup
	if err := r.call(ctx, http.MethodGet, "/deployments/"+url.PathEscape(id)+"/groups", nil, &groups); err != nil || r.json {
		return err
	}
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tMEMBERS\tGIVES")
	for _, g := range groups {
		var gives []string
		for _, role := range g.Roles {
			gives = append(gives, role.App+": "+role.Description)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\n", g.Name, len(g.Members), orDash(strings.Join(gives, "; ")))
	}
	return w.Flush()
}
