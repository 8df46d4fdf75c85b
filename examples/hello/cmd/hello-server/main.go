// Command hello-server is the program the hello app runs: a greeting page that counts
// its visits and its visitors in a PostgreSQL database.
//
// It is configured by its environment, as the hello plugin renders it:
//
//	LISTEN_ADDR           host:port to listen on
//	GREETING              the page's greeting
//	THEME                 light or dark
//	FOOTER                a line under the page, if any
//	PGHOST, PGPORT, PGDATABASE, PGUSER, PGSSLMODE
//	                      the database, in libpq's own variables
//	DB_PASSWORD_FILE      a file holding the database password
//	COOKIE_KEY_FILE       a file holding the key that signs visitor cookies
//
// Secrets come in files, never in the environment: the instance provider writes each one
// when it starts the process.
package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

const cookieName = "hello_visitor"

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{{.Greeting}}</title>
<style>body{font-family:sans-serif;max-width:40em;margin:4em auto;padding:0 1em}{{if eq .Theme "dark"}}body{background:#1b1b1f;color:#e8e8ec}{{end}}</style>
</head>
<body>
<h1>{{.Greeting}}</h1>
<p>This page was visited {{.Visits}} times by {{.Visitors}} visitors. You came {{.Yours}} times.</p>
{{with .Footer}}<footer>{{.}}</footer>{{end}}
</body>
</html>
`))

type server struct {
	db       *pgxpool.Pool
	key      []byte
	greeting string
	theme    string
	footer   string
}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	addr := os.Getenv("LISTEN_ADDR")
	if addr == "" {
		return errors.New("LISTEN_ADDR is not set: give the host:port to listen on")
	}
	password, err := readFile("DB_PASSWORD_FILE")
	if err != nil {
		return err
	}
	key, err := readFile("COOKIE_KEY_FILE")
	if err != nil {
		return err
	}
	// An empty connection string takes PGHOST, PGPORT, PGDATABASE, PGUSER and PGSSLMODE.
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return fmt.Errorf("database settings: %w", err)
	}
	cfg.ConnConfig.Password = password
	cfg.MaxConns = 4
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS visitors (
		id text PRIMARY KEY,
		visits bigint NOT NULL,
		first_seen timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("creating the visitors table: %w", err)
	}
	s := &server{db: db, key: []byte(key), greeting: os.Getenv("GREETING"), theme: os.Getenv("THEME"), footer: os.Getenv("FOOTER")}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET /healthz", s.health)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("listening on %s", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// readFile reads the file whose path the environment variable env holds.
func readFile(env string) (string, error) {
	path := os.Getenv(env)
	if path == "" {
		return "", fmt.Errorf("%s is not set: give the path of the file", env)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", env, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (s *server) index(w http.ResponseWriter, r *http.Request) {
	id := s.visitor(r)
	if id == "" {
		id = rand.Text()
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id + "." + s.sign(id), Path: "/",
			MaxAge: 365 * 24 * 3600, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}
	var data struct {
		Greeting, Theme, Footer string
		Visits, Visitors, Yours int64
	}
	data.Greeting, data.Theme, data.Footer = s.greeting, s.theme, s.footer
	ctx := r.Context()
	err := s.db.QueryRow(ctx, `INSERT INTO visitors (id, visits) VALUES ($1, 1)
		ON CONFLICT (id) DO UPDATE SET visits = visitors.visits + 1 RETURNING visits`, id).Scan(&data.Yours)
	if err == nil {
		err = s.db.QueryRow(ctx, `SELECT coalesce(sum(visits), 0), count(*) FROM visitors`).Scan(&data.Visits, &data.Visitors)
	}
	if err != nil {
		log.Printf("counting a visit: %v", err)
		http.Error(w, "the visit could not be counted; try again", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, data)
}

func (s *server) health(w http.ResponseWriter, r *http.Request) {
	if err := s.db.Ping(r.Context()); err != nil {
		http.Error(w, "database unreachable", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// visitor returns the visitor id of a cookie this server signed, or "".
func (s *server) visitor(r *http.Request) string {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	id, sig, ok := strings.Cut(c.Value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.sign(id))) {
		return ""
	}
	return id
}

func (s *server) sign(id string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}
