package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

// state is what the server holds under one instance's name.
type state struct {
	role, roleCanLogin bool
	roleComment        string
	db                 bool
	dbComment, dbOwner string
}

func (s *server) lookup(ctx context.Context, conn *pgxpool.Conn, name string) (state, error) {
	var st state
	var roleComment, dbComment, dbOwner *string
	var canLogin *bool
	err := conn.QueryRow(ctx, `
SELECT r.rolname IS NOT NULL, r.rolcanlogin, shobj_description(r.oid, 'pg_authid'),
       d.datname IS NOT NULL, shobj_description(d.oid, 'pg_database'), pg_get_userbyid(d.datdba)
FROM (SELECT $1::name AS n) q
LEFT JOIN pg_roles r ON r.rolname = q.n
LEFT JOIN pg_database d ON d.datname = q.n`, name).Scan(&st.role, &canLogin, &roleComment, &st.db, &dbComment, &dbOwner)
	if err != nil {
		return st, s.sqlError("looking up role and database "+name, err)
	}
	st.roleCanLogin = canLogin != nil && *canLogin
	st.roleComment = deref(roleComment)
	st.dbComment = deref(dbComment)
	st.dbOwner = deref(dbOwner)
	return st, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// owned refuses a role or database of that name that fedhost did not make for this
// tenant and instance. A database without a comment, owned by the tenant's marked role,
// is ours: a provision stopped between CREATE DATABASE and COMMENT left it.
func (st state) owned(name, marker string) error {
	if st.role && st.roleComment != marker {
		return sdk.Conflict("role %s exists and is not marked %q: it belongs to someone else, so fedhost neither adopts nor drops it", name, marker)
	}
	if st.db && st.dbComment != marker && !(st.dbComment == "" && st.role && st.dbOwner == name) {
		return sdk.Conflict("database %s exists and is not marked %q: it belongs to someone else, so fedhost neither adopts nor drops it", name, marker)
	}
	return nil
}

// ensure makes the role and database exist as the instance needs them. Every step is
// idempotent, so a provision that failed half-way is finished by the next one.
func (s *server) ensure(ctx context.Context, name, marker, verifier string, extensions []string) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	st, err := s.lookup(ctx, conn, name)
	if err != nil {
		return err
	}
	if err := st.owned(name, marker); err != nil {
		return err
	}

	// The role, its marker and the admin's membership commit together, so no role is
	// left without its marker. The password is always set: one statement, whether the
	// role is new, kept from a retained deprovision or had its password changed by hand.
	// The admin's membership lets a CREATEROLE admin (not a superuser) make the role
	// own the database and its schema, and later drop them.
	tx, err := conn.Begin(ctx)
	if err != nil {
		return s.sqlError("starting a transaction", err)
	}
	defer tx.Rollback(ctx)
	role := ident(name)
	stmts := []string{"ALTER ROLE " + role + " LOGIN PASSWORD " + literal(verifier)}
	if !st.role {
		stmts = []string{
			"CREATE ROLE " + role + " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD " + literal(verifier),
			"COMMENT ON ROLE " + role + " IS " + literal(marker),
		}
	}
	stmts = append(stmts, "GRANT "+role+" TO CURRENT_USER")
	for _, stmt := range stmts {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return s.sqlError("setting up role "+name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return s.sqlError("setting up role "+name, err)
	}

	if !st.db {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+role+" OWNER "+role); err != nil {
			return s.sqlError("creating database "+name, err)
		}
	}
	for _, stmt := range []string{
		"COMMENT ON DATABASE " + role + " IS " + literal(marker),
		"REVOKE CONNECT, TEMPORARY ON DATABASE " + role + " FROM PUBLIC",
		"GRANT CONNECT, TEMPORARY ON DATABASE " + role + " TO " + role,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return s.sqlError("setting up database "+name, err)
		}
	}

	db, err := s.connectDB(ctx, name)
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	stmts = []string{
		"REVOKE ALL ON SCHEMA public FROM PUBLIC",
		"ALTER SCHEMA public OWNER TO " + role,
	}
	for _, ext := range extensions {
		stmts = append(stmts, "CREATE EXTENSION IF NOT EXISTS "+ident(ext))
	}
	for _, stmt := range stmts {
		if _, err := db.Exec(ctx, stmt); err != nil {
			return s.sqlError("setting up database "+name, err)
		}
	}
	return nil
}

// disable keeps the database and the role that owns it, and takes away access: the role
// may not log in nor connect, and its sessions end.
func (s *server) disable(ctx context.Context, name, marker string) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	st, err := s.lookup(ctx, conn, name)
	if err != nil {
		return err
	}
	if err := st.owned(name, marker); err != nil {
		return err
	}
	role := ident(name)
	var stmts []string
	if st.role {
		stmts = append(stmts, "ALTER ROLE "+role+" NOLOGIN")
	}
	if st.db {
		stmts = append(stmts, "REVOKE CONNECT, TEMPORARY ON DATABASE "+role+" FROM PUBLIC, "+role)
	}
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return s.sqlError("taking access away from "+name, err)
		}
	}
	if st.role {
		return s.endSessions(ctx, conn, name)
	}
	return nil
}

// drop removes the database and the role; what is already gone is skipped.
func (s *server) drop(ctx context.Context, name, marker string) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	st, err := s.lookup(ctx, conn, name)
	if err != nil {
		return err
	}
	if err := st.owned(name, marker); err != nil {
		return err
	}
	role := ident(name)
	if st.db {
		// FORCE ends the sessions connected to the database first.
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+role+" WITH (FORCE)"); err != nil {
			return s.sqlError("dropping database "+name, err)
		}
	}
	if !st.role {
		return nil
	}
	if err := s.endSessions(ctx, conn, name); err != nil {
		return err
	}
	// DROP OWNED takes what the role still owns or was granted in the admin's database and
	// on shared objects, which would otherwise keep DROP ROLE from working.
	for _, stmt := range []string{"DROP OWNED BY " + role, "DROP ROLE IF EXISTS " + role} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return s.sqlError("dropping role "+name, err)
		}
	}
	return nil
}

// endSessions terminates every session of the role, on any database.
func (s *server) endSessions(ctx context.Context, conn *pgxpool.Conn, name string) error {
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()", name); err != nil {
		return s.sqlError(fmt.Sprintf("ending the sessions of role %s", name), err)
	}
	return nil
}

func (s *server) result(name string) contract.PostgreSQLResult {
	return contract.PostgreSQLResult{
		Host:     s.host,
		Port:     s.port,
		Database: name,
		User:     name,
		Password: contract.SecretRef{Secret: passwordKey},
		SSLMode:  s.sslmode,
	}
}
