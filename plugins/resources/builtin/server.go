package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"
)

// server is the one HTTP listener of every deployment's issuer.
type server struct {
	trustedProxies []netip.Prefix
	lookup         func(host string) *tenant
	now            func() time.Time
	log            hclog.Logger
	users, addrs   *failureLimiter

	ln   net.Listener
	http *http.Server
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o := s.originOf(r)
	t := s.lookup(hostKey(o.host))
	if t == nil {
		http.Error(w, "No issuer is served at this host name.", http.StatusNotFound)
		return
	}
	switch r.URL.Path {
	case loginPath:
		s.login(w, r, t, o)
		return
	case signedOutPath:
		render(w, http.StatusOK, loginView{Gone: true, Message: msgSignedOut})
		return
	case endSessionPath:
		// op ends the sessions kept here; the browser forgets its cookie too.
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	}
	p, err := t.handler()
	if err != nil {
		s.log.Error("the issuer's provider cannot start", "tenant", t.name, "error", err)
		http.Error(w, "The provider cannot serve this issuer just now.", http.StatusServiceUnavailable)
		return
	}
	p.ServeHTTP(w, r)
}

// upstream is the listener's host:port for the front door; a listener on every address
// (0.0.0.0, ::) is named by loopback, where a front door on this machine reaches it.
func (s *server) upstream() string {
	a, err := netip.ParseAddrPort(s.ln.Addr().String())
	if err != nil || !a.Addr().IsUnspecified() {
		return s.ln.Addr().String()
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), a.Port()).String()
}

func (s *server) serve() {
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
	}
	go func() {
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("the issuers' listener stopped", "error", err)
		}
	}()
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
}
