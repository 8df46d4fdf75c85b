package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// persistence is where the server keeps ACL users across a restart.
type persistence string

const (
	// persistACLFile: the server reads its users from an aclfile; ACL SAVE writes it.
	persistACLFile persistence = "aclfile"
	// persistRewrite: the server keeps its users in redis.conf; CONFIG REWRITE writes it.
	persistRewrite persistence = "config rewrite"
	// persistMemory: the server runs without a config file; users live until it stops.
	persistMemory persistence = "memory"
)

// unlinkBatch is how many keys one SCAN step asks for and one UNLINK removes.
const unlinkBatch = 1000

// server is the shared Redis server, seen through its admin user.
type server struct {
	client   *redis.Client
	address  string
	username string
	password string // only to take it out of error messages
	host     string // handed to applications
	port     int

	mu      sync.Mutex
	persist persistence // "" until first asked
}

func newServer(address, username, password string, tlsConfig *tls.Config, host string, port int) *server {
	return &server{
		client: redis.NewClient(&redis.Options{
			Addr:            address,
			Username:        username,
			Password:        password,
			TLSConfig:       tlsConfig,
			Protocol:        2,
			DisableIdentity: true,
			PoolSize:        4,
			MaxRetries:      1,
			DialTimeout:     5 * time.Second,
			ReadTimeout:     30 * time.Second,
			WriteTimeout:    30 * time.Second,
		}),
		address:  address,
		username: username,
		password: password,
		host:     host,
		port:     port,
	}
}

func (s *server) close() { _ = s.client.Close() }

// result is what an application gets for instance i.
func (s *server) result(i instance) contract.RedisResult {
	return contract.RedisResult{
		Host:      s.host,
		Port:      s.port,
		User:      i.user(),
		Password:  contract.SecretRef{Secret: passwordKey},
		KeyPrefix: i.prefix(),
	}
}

// aclUser is what ACL GETUSER tells of a user.
type aclUser struct {
	on    bool
	owned bool // carries the marker of the instance asked about
}

// lookup returns the ACL user of i, or nil when there is none.
func (s *server) lookup(ctx context.Context, i instance) (*aclUser, error) {
	v, err := s.client.Do(ctx, "ACL", "GETUSER", i.user()).Slice()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, s.fail(err, "reading ACL user "+i.user())
	}
	u := &aclUser{}
	for k := 0; k+1 < len(v); k += 2 {
		switch v[k] {
		case "flags":
			flags, _ := v[k+1].([]any)
			u.on = slices.Contains(flags, any("on"))
		case "selectors":
			selectors, _ := v[k+1].([]any)
			for _, sel := range selectors {
				fields, _ := sel.([]any)
				for f := 0; f+1 < len(fields); f += 2 {
					if keys, ok := fields[f+1].(string); ok && fields[f] == "keys" && slices.Contains(strings.Fields(keys), i.marker()) {
						u.owned = true
					}
				}
			}
		}
	}
	return u, nil
}

// owned returns the user of i, nil when there is none, and a conflict when the user
// exists without fedhost's marker for i.
func (s *server) owned(ctx context.Context, i instance) (*aclUser, error) {
	u, err := s.lookup(ctx, i)
	if err != nil || u == nil {
		return nil, err
	}
	if !u.owned {
		return nil, sdk.Conflict("ACL user %s exists on %s and was not made by fedhost for tenant %s, instance %s: rename or delete that user, or choose another instance name", i.user(), s.address, i.tenant, i.name)
	}
	return u, nil
}

// ensure creates or reconciles the user of i with the given password hash.
func (s *server) ensure(ctx context.Context, i instance, hash string) error {
	if _, err := s.owned(ctx, i); err != nil {
		return err
	}
	args := []any{"ACL", "SETUSER", i.user()}
	for _, r := range i.rules(hash) {
		args = append(args, r)
	}
	if err := s.client.Do(ctx, args...).Err(); err != nil {
		return s.fail(err, "setting ACL user "+i.user())
	}
	return s.save(ctx)
}

// remove deletes the user of i and, unless keepKeys, the keys under its prefix. It
// deletes the user first: Redis disconnects its clients, so none writes while the keys
// go. A user already gone still has its keys removed, which finishes an interrupted
// deprovision.
func (s *server) remove(ctx context.Context, i instance, keepKeys bool) (deleted int, err error) {
	u, err := s.owned(ctx, i)
	if err != nil {
		return 0, err
	}
	if u != nil {
		if err := s.client.Do(ctx, "ACL", "DELUSER", i.user()).Err(); err != nil {
			return 0, s.fail(err, "deleting ACL user "+i.user())
		}
		if err := s.save(ctx); err != nil {
			return 0, err
		}
	}
	if keepKeys {
		return 0, nil
	}
	return s.unlinkPrefix(ctx, i.prefix())
}

// unlinkPrefix removes every key of database 0 under prefix, in batches.
func (s *server) unlinkPrefix(ctx context.Context, prefix string) (int, error) {
	var cursor uint64
	deleted := 0
	for {
		keys, next, err := s.client.Scan(ctx, cursor, prefix+"*", unlinkBatch).Result()
		if err != nil {
			return deleted, s.fail(err, "listing the keys under "+prefix)
		}
		if len(keys) > 0 {
			n, err := s.client.Unlink(ctx, keys...).Result()
			if err != nil {
				return deleted, s.fail(err, "deleting the keys under "+prefix)
			}
			deleted += int(n)
		}
		if next == 0 {
			return deleted, nil
		}
		cursor = next
	}
}

// save writes the server's users where it reads them at start.
func (s *server) save(ctx context.Context) error {
	mode, err := s.persistence(ctx)
	if err != nil {
		return err
	}
	switch mode {
	case persistACLFile:
		if err := s.client.Do(ctx, "ACL", "SAVE").Err(); err != nil {
			return s.fail(err, "saving the ACL users to the aclfile (ACL SAVE)")
		}
	case persistRewrite:
		if err := s.client.ConfigRewrite(ctx).Err(); err != nil {
			return s.fail(err, "saving the ACL users to redis.conf (CONFIG REWRITE): let the server write its config file, or give it an aclfile")
		}
	}
	return nil
}

// persistence finds, once, where the server keeps its users. Neither aclfile nor the
// config file can change while the server runs.
func (s *server) persistence(ctx context.Context) (persistence, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.persist != "" {
		return s.persist, nil
	}
	cfg, err := s.client.ConfigGet(ctx, "aclfile").Result()
	if err != nil {
		return "", s.fail(err, "reading the aclfile setting")
	}
	if cfg["aclfile"] != "" {
		s.persist = persistACLFile
		return s.persist, nil
	}
	info, err := s.client.Info(ctx, "server").Result()
	if err != nil {
		return "", s.fail(err, "reading the server info")
	}
	s.persist = persistMemory
	for line := range strings.Lines(info) {
		if file, ok := strings.CutPrefix(strings.TrimSpace(line), "config_file:"); ok && file != "" {
			s.persist = persistRewrite
		}
	}
	if s.persist == persistMemory {
		hclog.Default().Warn("the Redis server runs without a config file or aclfile: its ACL users are lost when it stops, until each instance is provisioned again", "address", s.address)
	}
	return s.persist, nil
}

// fail turns a client error into one for the host: the server is unreachable, the admin
// credentials are wrong, or something else, never with the admin password in it.
func (s *server) fail(err error, doing string) error {
	msg := s.redact(err.Error())
	var netErr net.Error
	switch {
	case errors.As(err, &netErr), errors.Is(err, redis.ErrClosed), strings.Contains(msg, "connection refused"), strings.HasPrefix(msg, "EOF"):
		return sdk.Unavailable("%s: the Redis server %s cannot be reached: %s", doing, s.address, msg)
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"):
		return sdk.Invalid("settings/password", "%s: the Redis server %s refused user %q with the configured password: check username and password or password_file", doing, s.address, s.username)
	case strings.HasPrefix(msg, "NOPERM"):
		return sdk.Invalid("settings/username", "%s: user %q may not do this on %s (%s): the admin user needs +@all, or at least +acl +config|get +config|rewrite +info +scan +unlink", doing, s.username, s.address, msg)
	}
	return fmt.Errorf("%s on %s: %s", doing, s.address, msg)
}

func (s *server) redact(msg string) string {
	if s.password == "" {
		return msg
	}
	return strings.ReplaceAll(msg, s.password, "[password]")
}
