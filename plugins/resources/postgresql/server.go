package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fedhost/fedhost/sdk"
)

// server is the PostgreSQL server the plugin provisions on, through its admin role, and
// what it hands out to applications.
type server struct {
	admin *pgxpool.Config
	pool  *pgxpool.Pool
	// host, port and sslmode go into results.
	host    string
	port    int
	sslmode string
}

// address is the host:port applications connect to.
func (s *server) address() string { return net.JoinHostPort(s.host, strconv.Itoa(s.port)) }

// adminAddress is the host:port of the admin DSN, the way errors name the server: never
// the DSN, which holds the admin password.
func (s *server) adminAddress() string {
	return net.JoinHostPort(s.admin.ConnConfig.Host, strconv.Itoa(int(s.admin.ConnConfig.Port)))
}

func (s *server) close() { s.pool.Close() }

// acquire returns an admin connection to the admin DSN's database.
func (s *server) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.connectError(err)
	}
	return c, nil
}

// connectDB opens an admin connection to database name, for what must run inside it.
func (s *server) connectDB(ctx context.Context, name string) (*pgx.Conn, error) {
	cfg := s.admin.ConnConfig.Copy()
	cfg.Database = name
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, s.connectError(err)
	}
	return c, nil
}

// connectError tells a server that refused the admin role (the settings are wrong)
// from one that cannot be reached (retrying may help).
func (s *server) connectError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if strings.HasPrefix(pgErr.Code, "28") || pgErr.Code == "3D000" {
			return sdk.Invalid("settings/url", "PostgreSQL at %s refused the admin role %q: %s", s.adminAddress(), s.admin.ConnConfig.User, s.redact(pgErr.Message))
		}
		return sdk.Unavailable("PostgreSQL at %s: %s", s.adminAddress(), s.redact(pgErr.Message))
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	inner := err
	for u := errors.Unwrap(inner); u != nil; u = errors.Unwrap(inner) {
		inner = u
	}
	return sdk.Unavailable("PostgreSQL at %s is unreachable: %s", s.adminAddress(), s.redact(inner.Error()))
}

// sqlError wraps a failed statement with what the plugin was doing.
func (s *server) sqlError(doing string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Errorf("%s on %s: %s (SQLSTATE %s)", doing, s.adminAddress(), s.redact(pgErr.Message), pgErr.Code)
	}
	if pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed) {
		return sdk.Unavailable("%s on %s: %s", doing, s.adminAddress(), s.redact(err.Error()))
	}
	return fmt.Errorf("%s on %s: %s", doing, s.adminAddress(), s.redact(err.Error()))
}

// redact removes the admin password from a server or driver message, in case one quotes it.
func (s *server) redact(msg string) string { return redact(msg, s.admin.ConnConfig.Password) }

func redact(msg, secret string) string {
	if len(secret) < 4 {
		return msg
	}
	return strings.ReplaceAll(msg, secret, "<redacted>")
}

// ident quotes a name as an SQL identifier.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes a string as an SQL literal, for the statements that take no parameters
// (COMMENT, PASSWORD).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
