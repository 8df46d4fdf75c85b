package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/store"
)

// ErrOIDCRefused is wrapped by every refused single sign-on; the message says why
// and what to do, and never holds a token.
var ErrOIDCRefused = errors.New("single sign-on refused")

// OIDCConfig is an OpenID provider operators may log in with.
type OIDCConfig struct {
	// Issuer is the provider's URL; its discovery document is read by NewOIDC.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is fedhost's callback as registered with the provider.
	RedirectURL string
	// UsernameClaim is the ID token claim holding the user name; "preferred_username" when empty.
	UsernameClaim string
	// SuperuserGroup, when set, is the group (in the "groups" claim) whose members
	// are superusers: a log-in promotes a member and demotes anyone else.
	SuperuserGroup string
	// CreateUsers creates the account of an unknown user, without a usable password;
	// without it an unknown user is refused.
	CreateUsers bool
	// HTTPClient talks to the provider; http.DefaultClient when nil.
	HTTPClient *http.Client
}

// OIDCLoginTimeout is how long a browser may take between AuthURL and Finish.
const OIDCLoginTimeout = 10 * time.Minute

// groupsClaim is the claim SuperuserGroup is looked up in, as Keycloak, Authentik,
// Dex and most others name it.
const groupsClaim = "groups"

// OIDC logs operators in with an OpenID provider: the authorization code flow with
// PKCE (S256), state and nonce. It holds no per-login state: the caller keeps state,
// nonce and verifier between AuthURL and Finish. It is safe for concurrent use.
type OIDC struct {
	svc      *Service
	cfg      OIDCConfig
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// NewOIDC reads the provider's discovery document and returns the OIDC of svc.
func NewOIDC(ctx context.Context, svc *Service, cfg OIDCConfig) (*OIDC, error) {
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = "preferred_username"
	}
	scopes := []string{oidc.ScopeOpenID, "profile", "email"}
	if cfg.SuperuserGroup != "" {
		// Only then: some providers refuse a scope they do not know.
		scopes = append(scopes, groupsClaim)
	}
	provider, err := oidc.NewProvider(clientContext(ctx, cfg.HTTPClient), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("reading the discovery document of the OpenID provider %s: %w; check operator_oidc.issuer and that the provider is reachable", cfg.Issuer, err)
	}
	return &OIDC{
		svc: svc,
		cfg: cfg,
		oauth: oauth2.Config{
			ClientID:     cfg.ClientID,
			ClientSecret: cfg.ClientSecret,
			RedirectURL:  cfg.RedirectURL,
			Endpoint:     provider.Endpoint(),
			Scopes:       scopes,
		},
		// The audience must be our client ID, the issuer the configured one and the
		// token unexpired on the service's clock.
		verifier: provider.Verifier(&oidc.Config{ClientID: cfg.ClientID, Now: svc.now}),
	}, nil
}

func clientContext(ctx context.Context, client *http.Client) context.Context {
	if client == nil {
		return ctx
	}
	return oidc.ClientContext(ctx, client)
}

// AuthURL begins a log-in: the browser goes to url, and the caller keeps state,
// nonce and verifier for Finish, unseen by anyone but this browser.
func (o *OIDC) AuthURL() (url, state, nonce, verifier string) {
	state, nonce, verifier = randomString(), randomString(), oauth2.GenerateVerifier()
	url = o.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
	return url, state, nonce, verifier
}

// Finish ends a log-in begun by AuthURL: gotState and code are what the provider
// sent back to the redirect URL, state, nonce and verifier what AuthURL returned.
// It exchanges the code, verifies the ID token, and returns the user its username
// claim names. Every refusal wraps ErrOIDCRefused and is recorded.
func (o *OIDC) Finish(ctx context.Context, code, state, nonce, verifier, gotState string) (User, error) {
	if state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(gotState)) != 1 {
		return o.refuse(ctx, "", "state", fmt.Sprintf("the log-in was not begun in this browser, or took more than %d minutes: log in again", int(OIDCLoginTimeout.Minutes())))
	}
	if code == "" {
		return o.refuse(ctx, "", "code", "the OpenID provider sent no authorization code: log in again")
	}
	ctx = clientContext(ctx, o.cfg.HTTPClient)
	token, err := o.oauth.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		// The provider's answer is not shown: it may quote the request.
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return o.refuse(ctx, "", "code exchange", "the OpenID provider did not accept the authorization code: log in again")
		}
		return User{}, errors.Join(fmt.Errorf("exchanging the authorization code with the OpenID provider %s: %w", o.cfg.Issuer, err),
			o.svc.record(ctx, audit.Event{Issuer: audit.IssuerOIDC, Action: "user.login", Result: audit.ResultError, Reason: "code exchange"}))
	}
	raw, ok := token.Extra("id_token").(string)
	if !ok || raw == "" {
		return o.refuse(ctx, "", "id token", "the OpenID provider sent no ID token: tell your hosting provider")
	}
	idToken, err := o.verifier.Verify(ctx, raw)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			return o.refuse(ctx, "", "id token expiry", "the ID token of the OpenID provider has expired: check the clocks of fedhost and the provider, and log in again")
		}
		return o.refuse(ctx, "", "id token", "the ID token of the OpenID provider is not valid for fedhost (issuer, audience or signature): tell your hosting provider")
	}
	if nonce == "" || subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(nonce)) != 1 {
		return o.refuse(ctx, "", "nonce", "the ID token was not issued for this log-in: log in again")
	}
	if idToken.AccessTokenHash != "" {
		if err := idToken.VerifyAccessToken(token.AccessToken); err != nil {
			return o.refuse(ctx, "", "access token hash", "the OpenID provider's access token does not match its ID token: log in again")
		}
	}

	var claims map[string]any
	if err := idToken.Claims(&claims); err != nil {
		return o.refuse(ctx, "", "claims", "the ID token's claims cannot be read: tell your hosting provider")
	}
	claimed, _ := claims[o.cfg.UsernameClaim].(string)
	if claimed == "" {
		return o.refuse(ctx, "", "username claim", fmt.Sprintf("the ID token has no %q claim: tell your hosting provider to add it, or to set operator_oidc.username_claim", o.cfg.UsernameClaim))
	}
	// Names are lowercase in fedhost, so "Alice" at the provider is the account "alice".
	name := strings.ToLower(claimed)
	if !namePattern.MatchString(name) {
		return o.refuse(ctx, "", "username claim", fmt.Sprintf("the %s claim of the ID token cannot be a fedhost user name, which has 1 to 64 lowercase letters, digits and . _ @ -: tell your hosting provider", o.cfg.UsernameClaim))
	}
	superuser := o.cfg.SuperuserGroup != "" && slices.Contains(stringsOf(claims[groupsClaim]), o.cfg.SuperuserGroup)

	u, err := o.svc.st.UserByName(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		if !o.cfg.CreateUsers {
			return o.refuse(ctx, "", "unknown user", fmt.Sprintf("there is no fedhost account named %q: ask a superuser to create it, then log in again", name))
		}
		u, err = o.create(ctx, name, superuser)
	}
	if err != nil {
		return User{}, err
	}
	if u.Disabled {
		return o.refuse(ctx, u.ID, "disabled", fmt.Sprintf("the fedhost account %q is disabled: ask a superuser to enable it", name))
	}
	if o.cfg.SuperuserGroup != "" && u.Superuser != superuser {
		if u, err = o.setSuperuser(ctx, u, superuser); err != nil {
			return User{}, err
		}
	}
	e := audit.Event{Actor: u.ID, Issuer: audit.IssuerOIDC, Action: "user.login", Subject: u.ID, Result: audit.ResultOK}
	if err := o.svc.record(ctx, e); err != nil {
		return User{}, err
	}
	return userOf(u), nil
}

// Refused records a log-in the OpenID provider itself refused, with the error code it
// sent to the redirect URL (RFC 6749 4.1.2.1), and returns the error to show.
func (o *OIDC) Refused(ctx context.Context, providerError string) error {
	_, err := o.refuse(ctx, "", "provider", fmt.Sprintf("the OpenID provider refused the log-in (%s): try again, or ask your hosting provider", providerCode(providerError)))
	return err
}

// providerCode keeps only a known error code, so no text of the provider's reaches the page or the trail.
func providerCode(code string) string {
	switch code {
	case "access_denied", "login_required", "consent_required", "interaction_required", "account_selection_required",
		"invalid_request", "unauthorized_client", "unsupported_response_type", "invalid_scope", "server_error", "temporarily_unavailable":
		return code
	}
	return "unknown error"
}

// refuse records a refused log-in of actor ("" before the user is known) with reason,
// the step that failed, and returns ErrOIDCRefused with message.
func (o *OIDC) refuse(ctx context.Context, actor, reason, message string) (User, error) {
	e := audit.Event{Actor: actor, Issuer: audit.IssuerOIDC, Action: "user.login", Subject: actor, Result: audit.ResultDenied, Reason: reason}
	return User{}, errors.Join(fmt.Errorf("%w: %s", ErrOIDCRefused, message), o.svc.record(ctx, e))
}

// create makes the account of a user the provider vouched for. Its password is a
// hash of random text no one knows: the user logs in by the provider until a
// superuser resets it.
func (o *OIDC) create(ctx context.Context, name string, superuser bool) (store.User, error) {
	u, err := o.svc.st.CreateUser(ctx, store.User{Name: name, PasswordHash: HashPassword(rand.Text(), o.svc.params), Superuser: superuser, CreatedAt: o.svc.clock()})
	if errors.Is(err, store.ErrConflict) {
		// A log-in of the same user in another tab created it first.
		return o.svc.st.UserByName(ctx, name)
	}
	e := audit.Event{Actor: u.ID, Issuer: audit.IssuerOIDC, Action: "user.create", Subject: u.ID, Result: audit.ResultOK}
	if err != nil {
		e.Result, e.Reason = audit.ResultError, "store"
	}
	return u, errors.Join(err, o.svc.record(ctx, e))
}

// setSuperuser makes the user a superuser or not, as the provider's groups say.
func (o *OIDC) setSuperuser(ctx context.Context, u store.User, superuser bool) (store.User, error) {
	action := "user.demote"
	if superuser {
		action = "user.promote"
	}
	// The provider's groups decide, even about the last superuser: the host's command
	// line can still promote one.
	err := o.svc.st.UpdateUser(ctx, u.ID, store.UserChange{Superuser: &superuser, MayRemoveLastSuperuser: true}, o.svc.clock())
	e := audit.Event{Actor: u.ID, Issuer: audit.IssuerOIDC, Action: action, Subject: u.ID, Result: audit.ResultOK}
	if err != nil {
		e.Result, e.Reason = audit.ResultError, "store"
	}
	if err := errors.Join(err, o.svc.record(ctx, e)); err != nil {
		return store.User{}, err
	}
	u.Superuser = superuser
	return u, nil
}

// stringsOf reads a claim that is a list of strings or a single string.
func stringsOf(claim any) []string {
	switch v := claim.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, s := range v {
			if s, ok := s.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
