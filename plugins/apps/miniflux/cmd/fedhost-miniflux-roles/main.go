// Command fedhost-miniflux-roles makes Miniflux's administrators follow the deployment's
// directory: it runs in Miniflux's node (the miniflux app's sync-roles operation), reads
// {"admins": [names]} on stdin, and through Miniflux's REST API (PUT /v1/users/{id} with
// is_admin) makes those users administrators and every other user not, except the
// node's own ADMIN_USERNAME, whose credentials it signs in with. It reads the address
// and the credentials from the node's environment (LISTEN_ADDR, BASE_URL,
// ADMIN_USERNAME, ADMIN_PASSWORD_FILE), so the password never leaves the node.
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

// Input is what the miniflux plugin writes on stdin.
type Input struct {
	Admins []string `json:"admins"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fedhost-miniflux-roles:", err)
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
		return errors.New(`stdin is not {"admins": [names]}`)
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
