package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/hashicorp/go-hclog"
)

// relay is the submission listener: it takes a message from an authenticated account,
// checks that envelope and header come from the account's address, and hands it to the
// upstream server before it answers. It keeps no queue: a message the upstream does
// not take is refused to the app with the upstream's class of error (4xx: try again).
type relay struct {
	cfg      *config
	accounts *accounts
	log      hclog.Logger
	server   *smtp.Server
	listener net.Listener
	limiter  *loginLimiter
}

// dialTimeout and commandTimeout bound each step with the upstream server.
const (
	dialTimeout    = 30 * time.Second
	commandTimeout = 5 * time.Minute
)

func startRelay(cfg *config, accts *accounts, log hclog.Logger) (*relay, error) {
	r := &relay{cfg: cfg, accounts: accts, log: log, limiter: newLoginLimiter()}
	s := smtp.NewServer(r)
	s.Domain = cfg.Host
	s.MaxMessageBytes = cfg.MaxMessageBytes
	s.MaxRecipients = cfg.MaxRecipients
	s.ReadTimeout = commandTimeout
	s.WriteTimeout = commandTimeout
	s.ErrorLog = smtpLog{log}
	// Without TLS (a loopback listener only, see parseSettings) passwords cross the
	// loopback interface alone.
	s.AllowInsecureAuth = cfg.TLS == "none"
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("the relay cannot listen on the address of settings/listen: %w", err)
	}
	if cfg.TLS != "none" {
		certs := &certificate{certFile: cfg.CertFile, keyFile: cfg.KeyFile}
		s.TLSConfig = &tls.Config{GetCertificate: certs.get, MinVersion: tls.VersionTLS12}
		if cfg.TLS == "tls" {
			l = tls.NewListener(l, s.TLSConfig)
		}
	}
	r.server, r.listener = s, l
	go func() {
		if err := s.Serve(l); err != nil && !errors.Is(err, smtp.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			log.Error("the relay's listener stopped", "error", err)
		}
	}()
	log.Info("relay listening", "address", l.Addr().String(), "tls", cfg.TLS, "upstream", net.JoinHostPort(cfg.Upstream.Host, strconv.Itoa(cfg.Upstream.Port)), "upstream_tls", cfg.Upstream.TLS)
	return r, nil
}

// stop closes the listener (also when Serve has not taken it yet) and every connection.
func (r *relay) stop() {
	_ = r.server.Close()
	_ = r.listener.Close()
}

// NewSession starts a session of one connection.
func (r *relay) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{relay: r, remote: c.Conn().RemoteAddr().String()}, nil
}

type session struct {
	relay  *relay
	remote string

	user string // authenticated account, "" before AUTH
	from string
	to   []string
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain {
		return nil, smtp.ErrAuthUnsupported
	}
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if identity != "" && identity != username {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "an authorization identity other than the user is not supported"}
		}
		if s.relay.limiter.blocked(s.remote) {
			return errTooManyFailures
		}
		a, ok := s.relay.accounts.authenticate(username, password)
		if !ok {
			s.relay.limiter.failed(s.remote)
			// Neither the name tried nor the password: a name may be a password typed
			// in the wrong field.
			s.relay.log.Warn("authentication refused", "remote", s.remote)
			return smtp.ErrAuthFailed
		}
		s.user = a.user()
		return nil
	}), nil
}

// errTooManyFailures is RFC 4954's temporary authentication failure, for an address
// past its refused log-ins (limit.go).
var errTooManyFailures = &smtp.SMTPError{Code: 454, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "too many refused log-ins from this address; try again later"}

// errAuthRequired is RFC 4954's reply to MAIL before AUTH (go-smtp's own says 502).
var errAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "authentication required"}

// account is the session's account as it is now: a deprovisioned one ends the right to
// send of sessions that authenticated before.
func (s *session) account() (account, error) {
	if s.user == "" {
		return account{}, errAuthRequired
	}
	a, ok := s.relay.accounts.get(s.user)
	if !ok {
		return account{}, &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "the account was removed"}
	}
	return a, nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	a, err := s.account()
	if err != nil {
		return err
	}
	if !strings.EqualFold(from, a.From) {
		return &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "this account sends only from its own address (MAIL FROM)"}
	}
	s.from = a.From
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.from == "" {
		return &smtp.SMTPError{Code: 503, EnhancedCode: smtp.EnhancedCode{5, 5, 1}, Message: "MAIL FROM first"}
	}
	if to == "" || len(to) > 320 || strings.ContainsAny(to, " \r\n\x00") || !strings.Contains(to, "@") {
		return &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 1, 3}, Message: "the recipient is not a mail address"}
	}
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	a, err := s.account()
	if err != nil {
		_, _ = io.Copy(io.Discard, r)
		return err
	}
	msg, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if s.from != a.From { // the account was given another address since MAIL FROM
		return &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "this account sends only from its own address (MAIL FROM)"}
	}
	if err := checkSenders(msg, a.From); err != nil {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	start := time.Now()
	if err := s.relay.forward(ctx, s.from, s.to, msg); err != nil {
		s.relay.log.Warn("the upstream did not take a message", "tenant", a.Tenant, "instance", a.Instance, "error", err)
		var se *smtp.SMTPError
		var refused messageRefused
		if errors.As(err, &refused) && errors.As(err, &se) && !se.Temporary() {
			return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 0, 0}, Message: fmt.Sprintf("the upstream server refused the message (%d)", se.Code)}
		}
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 4, 1}, Message: "the upstream server did not take the message; try again later"}
	}
	s.relay.log.Info("message relayed", "tenant", a.Tenant, "instance", a.Instance, "recipients", len(s.to), "bytes", len(msg), "ms", time.Since(start).Milliseconds())
	return nil
}

func (s *session) Reset() {
	s.from, s.to = "", nil
}

func (s *session) Logout() error { return nil }

// forward hands one message to the upstream server on a connection of its own.
func (r *relay) forward(ctx context.Context, from string, to []string, msg []byte) error {
	u := r.cfg.Upstream
	addr := net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	tlsConfig := &tls.Config{ServerName: u.Host, RootCAs: r.cfg.upstreamRoots, MinVersion: tls.VersionTLS12}
	var c *smtp.Client
	switch u.TLS {
	case "tls":
		c = smtp.NewClient(tls.Client(conn, tlsConfig))
	case "starttls":
		if c, err = smtp.NewClientStartTLS(conn, tlsConfig); err != nil {
			conn.Close()
			return err
		}
	default:
		c = smtp.NewClient(conn)
	}
	defer c.Close()
	if err := c.Hello(u.HELO); err != nil {
		return err
	}
	if u.User != "" {
		if err := c.Auth(sasl.NewPlainClient("", u.User, r.cfg.upstreamPassword)); err != nil {
			return err
		}
	}
	if err := c.SendMail(from, to, bytes.NewReader(msg)); err != nil {
		return messageRefused{err}
	}
	return c.Quit()
}

// messageRefused is the upstream's answer to the message itself (MAIL, RCPT, DATA), not
// to the relay's connection or log-in: only such a permanent refusal is permanent to the
// app too; the relay's own trouble with the upstream is the hosting provider's to fix,
// and the app tries again.
type messageRefused struct{ err error }

func (e messageRefused) Error() string { return e.err.Error() }
func (e messageRefused) Unwrap() error { return e.err }

// certificate is the listener's key pair, read again when its files change, so a
// renewed certificate is served without a restart.
type certificate struct {
	certFile, keyFile string

	mu      sync.Mutex
	checked time.Time
	stamp   string
	cert    *tls.Certificate
}

func (c *certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && time.Since(c.checked) < 10*time.Second {
		return c.cert, nil
	}
	c.checked = time.Now()
	stamp := fileStamp(c.certFile) + fileStamp(c.keyFile)
	if c.cert != nil && stamp == c.stamp {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil // a renewal half written: keep serving the last good pair
		}
		return nil, err
	}
	c.cert, c.stamp = &cert, stamp
	return c.cert, nil
}

// smtpLog gives go-smtp's connection errors to the plugin's logger.
type smtpLog struct{ log hclog.Logger }

func (l smtpLog) Printf(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l smtpLog) Println(v ...any)               { l.log.Debug(fmt.Sprint(v...)) }

var (
	_ smtp.Backend     = (*relay)(nil)
	_ smtp.AuthSession = (*session)(nil)
)

// fileStamp changes when the file at path is replaced or written.
func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("%d/%d;", fi.ModTime().UnixNano(), fi.Size())
}
