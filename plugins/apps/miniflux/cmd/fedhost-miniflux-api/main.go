// Command fedhost-miniflux-api does, through Miniflux's REST API, what Miniflux's command
// line cannot: it runs in Miniflux's web node (the miniflux app's operations), signs in as
// the node's own administrator (ADMIN_USERNAME, ADMIN_PASSWORD_FILE) at the address the
// node listens on (LISTEN_ADDR, under BASE_URL's path), so that password never leaves the
// node, and reads one JSON request on stdin:
//
//   - {"admins": [names]} (sync-roles): PUT /v1/users/{id} with is_admin makes those users
//     administrators and every other user not, except the node's own administrator;
//   - {"create_user": {"username", "password"}} (create-user of a user who is no
//     administrator; -create-admin makes administrators only): POST /v1/users with
//     is_admin false.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"miniflux.app/v2/client"
)

// maxInput bounds what is read on stdin.
const maxInput = 1 << 20

// Input is what the miniflux plugin writes on stdin: Admins for a sync, or CreateUser.
type Input struct {
	Admins     []string    `json:"admins"`
	CreateUser *CreateUser `json:"create_user"`
}

// CreateUser is a user to make who is no administrator.
type CreateUser struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fedhost-miniflux-api:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	b, err := io.ReadAll(io.LimitReader(stdin, maxInput+1))
	if err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	if len(b) > maxInput {
		return fmt.Errorf("the input on stdin is larger than %d bytes", maxInput)
	}
	var in Input
	if err := json.Unmarshal(b, &in); err != nil {
		return errors.New(`stdin is not {"admins": [names]} nor {"create_user": {"username", "password"}}`)
	}
	if in.CreateUser == nil && in.Admins == nil {
		return errors.New(`stdin names neither "admins" nor "create_user"`)
	}
	endpoint, err := endpointOf(os.Getenv("LISTEN_ADDR"), os.Getenv("BASE_URL"))
	if err != nil {
		return err
	}
	adminName := os.Getenv("ADMIN_USERNAME")
	passwordFile := os.Getenv("ADMIN_PASSWORD_FILE")
	if adminName == "" || passwordFile == "" {
		return errors.New("ADMIN_USERNAME and ADMIN_PASSWORD_FILE are not set: run this in a Miniflux node the miniflux plugin rendered")
	}
	password, err := os.ReadFile(passwordFile)
	if err != nil {
		return fmt.Errorf("reading ADMIN_PASSWORD_FILE: %w", err)
	}
	c := client.NewClientWithOptions(endpoint, client.WithCredentials(adminName, strings.TrimSpace(string(password))))
	if in.CreateUser != nil {
		return createUser(ctx, c, adminName, *in.CreateUser, stdout)
	}
	users, err := c.UsersContext(ctx)
	if err != nil {
		return fmt.Errorf("listing Miniflux's users as %s: %w", adminName, err)
	}
	admins := make(map[string]bool, len(in.Admins))
	for _, name := range in.Admins {
		admins[name] = true
	}
	changed := 0
	for _, u := range users {
		want := admins[u.Username]
		if u.Username == adminName || u.IsAdmin == want {
			continue
		}
		if _, err := c.UpdateUserContext(ctx, u.ID, &client.UserModificationRequest{IsAdmin: &want}); err != nil {
			return fmt.Errorf("setting is_admin of user %d: %w", u.ID, err)
		}
		changed++
		if want {
			fmt.Fprintf(stdout, "%s: now an administrator\n", u.Username)
		} else {
			fmt.Fprintf(stdout, "%s: no longer an administrator\n", u.Username)
		}
	}
	fmt.Fprintf(stdout, "%d users checked, %d changed\n", len(users), changed)
	return nil
}

// createUser makes a user who is no administrator. Miniflux's own refusal (a name
// taken, a password too short) is passed on; the password is in no message.
func createUser(ctx context.Context, c *client.Client, adminName string, u CreateUser, stdout io.Writer) error {
	made, err := c.CreateUserContext(ctx, u.Username, u.Password, false)
	if errors.Is(err, client.ErrNotAuthorized) || errors.Is(err, client.ErrForbidden) {
		return fmt.Errorf("Miniflux refused the administrator %s with the password in ADMIN_PASSWORD_FILE: if that administrator's password was changed in Miniflux, this operation cannot sign in as it; make the user in Miniflux's settings", adminName)
	}
	if err != nil {
		return fmt.Errorf("creating the user: %w", err)
	}
	fmt.Fprintf(stdout, "user %s created (id %d), not an administrator\n", made.Username, made.ID)
	return nil
}

// endpointOf is Miniflux's address as the node listens (LISTEN_ADDR), under BASE_URL's
// path: the node's public URL may be one the node cannot reach.
func endpointOf(listen, base string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", errors.New("LISTEN_ADDR is not host:port: run this in a Miniflux node the miniflux plugin rendered")
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}
	if b, err := url.Parse(base); err == nil {
		u.Path = strings.TrimSuffix(b.Path, "/")
	}
	return u.String(), nil
}
