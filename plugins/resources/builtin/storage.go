package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

const (
	// sessionLifetime is how long a sign-in at the issuer lets the user into the
	// deployment's other apps without the password again.
	sessionLifetime      = 8 * time.Hour
	idTokenLifetime      = time.Hour
	accessTokenLifetime  = time.Hour
	refreshTokenLifetime = 30 * 24 * time.Hour
	authRequestLifetime  = 10 * time.Minute
	// maxPending bounds the sign-ins in progress of one deployment.
	maxPending = 20000
	// maxTokens bounds the live access and refresh tokens of one deployment.
	maxTokens = 200000
)

func cryptoRand(b []byte) (int, error) { return rand.Read(b) }

// authRequest is one sign-in in progress, in memory only.
type authRequest struct {
	ID            string
	ClientID      string
	RedirectURI   string
	Scopes        []string
	State         string
	Nonce         string
	ResponseType  oidc.ResponseType
	ResponseMode  oidc.ResponseMode
	CodeChallenge *oidc.CodeChallenge
	Created       time.Time
	// forceLogin is set by prompt=login or max_age=0: a session does not do.
	forceLogin bool
	// csrf is the value of the log-in form's cookie and hidden field.
	csrf string
	code string

	done     bool
	authTime time.Time
	user     user
}

func (a *authRequest) GetID() string                         { return a.ID }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.ClientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.CodeChallenge }
func (a *authRequest) GetNonce() string                      { return a.Nonce }
func (a *authRequest) GetRedirectURI() string                { return a.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.ResponseMode }
func (a *authRequest) GetScopes() []string                   { return a.Scopes }
func (a *authRequest) GetState() string                      { return a.State }
func (a *authRequest) GetSubject() string                    { return a.user.Subject }
func (a *authRequest) Done() bool                            { return a.done }

// accessToken is an issued access token's record; the token itself is op's encryption of
// its ID and subject.
type accessToken struct {
	ID       string
	ClientID string
	Scopes   []string
	Expiry   time.Time
	user     user
}

// session is a user signed in at the issuer, kept under the SHA-256 of its cookie.
type session struct {
	user     user
	authTime time.Time
	expiry   time.Time
}

// refreshToken is an issued refresh token's record, kept under the token's SHA-256.
type refreshToken struct {
	ClientID string
	Scopes   []string
	AuthTime time.Time
	Expiry   time.Time
	user     user
}

func (r *refreshToken) GetAMR() []string                 { return []string{"pwd"} }
func (r *refreshToken) GetAudience() []string            { return []string{r.ClientID} }
func (r *refreshToken) GetAuthTime() time.Time           { return r.AuthTime }
func (r *refreshToken) GetClientID() string              { return r.ClientID }
func (r *refreshToken) GetScopes() []string              { return r.Scopes }
func (r *refreshToken) GetSubject() string               { return r.user.Subject }
func (r *refreshToken) SetCurrentScopes(scopes []string) { r.Scopes = scopes }

var errNotFound = errors.New("not found")

// CreateAuthRequest keeps a new sign-in; only S256 PKCE challenges are taken.
func (t *tenant) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if req.CodeChallenge != "" && req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("code_challenge_method must be S256")
	}
	client := t.client(req.ClientID)
	if client == nil {
		return nil, oidc.ErrInvalidClient().WithDescription("unknown client")
	}
	// op lets the standard scopes through for any client; this client gets only its own.
	scopes := slices.DeleteFunc(slices.Clone([]string(req.Scopes)), func(s string) bool { return !slices.Contains(client.Scopes, s) })
	a := &authRequest{
		ID:           rand.Text(),
		ClientID:     req.ClientID,
		RedirectURI:  req.RedirectURI,
		Scopes:       scopes,
		State:        req.State,
		Nonce:        req.Nonce,
		ResponseType: req.ResponseType,
		ResponseMode: req.ResponseMode,
		Created:      t.now(),
		csrf:         rand.Text(),
		forceLogin:   slices.Contains(req.Prompt, oidc.PromptLogin) || (req.MaxAge != nil && *req.MaxAge == 0),
	}
	if req.CodeChallenge != "" {
		a.CodeChallenge = &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.authRequests) >= maxPending {
		return nil, oidc.ErrServerError().WithDescription("too many sign-ins in progress; try again in a few minutes")
	}
	t.authRequests[a.ID] = a
	return a, nil
}

func (t *tenant) authRequest(id string) (*authRequest, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	a, ok := t.authRequests[id]
	if !ok || t.now().After(a.Created.Add(authRequestLifetime)) {
		return nil, errNotFound
	}
	return a, nil
}

func (t *tenant) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	return t.authRequest(id)
}

func (t *tenant) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	t.mu.RLock()
	id, ok := t.codes[code]
	t.mu.RUnlock()
	if !ok {
		return nil, errNotFound
	}
	return t.authRequest(id)
}

func (t *tenant) SaveAuthCode(_ context.Context, id, code string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.authRequests[id]
	if !ok {
		return errNotFound
	}
	a.code = code
	t.codes[code] = id
	return nil
}

func (t *tenant) DeleteAuthRequest(_ context.Context, id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.authRequests[id]; ok {
		delete(t.codes, a.code)
		delete(t.authRequests, id)
	}
	return nil
}

// grantOf is the client and user of any token request this provider hands op.
func grantOf(req op.TokenRequest) (clientID string, u user, scopes []string, authTime time.Time) {
	switch r := req.(type) {
	case *authRequest:
		return r.ClientID, r.user, r.Scopes, r.authTime
	case *refreshToken:
		return r.ClientID, r.user, r.Scopes, r.AuthTime
	}
	return "", user{}, nil, time.Time{}
}

func (t *tenant) newAccessToken(req op.TokenRequest) (*accessToken, error) {
	clientID, u, scopes, _ := grantOf(req)
	if clientID == "" {
		return nil, oidc.ErrUnsupportedGrantType()
	}
	a := &accessToken{ID: rand.Text(), ClientID: clientID, Scopes: scopes, Expiry: t.now().Add(accessTokenLifetime), user: u}
	if len(t.tokens) >= maxTokens {
		return nil, oidc.ErrServerError().WithDescription("too many live tokens; try again later")
	}
	t.tokens[a.ID] = a
	return a, nil
}

func (t *tenant) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, err := t.newAccessToken(req)
	if err != nil {
		return "", time.Time{}, err
	}
	return a.ID, a.Expiry, nil
}

// CreateAccessAndRefreshTokens issues an access token and a new refresh token; the one
// presented, if any, is spent (refresh tokens rotate).
func (t *tenant) CreateAccessAndRefreshTokens(_ context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	clientID, u, scopes, authTime := grantOf(req)
	t.mu.Lock()
	defer t.mu.Unlock()
	a, err := t.newAccessToken(req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	if current != "" {
		h := sha256.Sum256([]byte(current))
		if _, ok := t.refresh[h]; !ok {
			delete(t.tokens, a.ID)
			return "", "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("the refresh token was used already")
		}
		delete(t.refresh, h)
	}
	token := rand.Text() + rand.Text()
	t.refresh[sha256.Sum256([]byte(token))] = &refreshToken{
		ClientID: clientID, Scopes: scopes, AuthTime: authTime, user: u,
		Expiry: t.now().Add(refreshTokenLifetime),
	}
	return a.ID, token, a.Expiry, nil
}

// TokenRequestByRefreshToken finds the refresh token and reads its user from the
// directory again: a user disabled, removed or taken out of the client's groups since
// the sign-in gets no new tokens.
func (t *tenant) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	t.mu.RLock()
	r, ok := t.refresh[sha256.Sum256([]byte(token))]
	var client *clientRecord
	if ok {
		client = t.rec.Clients[r.ClientID]
	}
	dir := t.dir
	t.mu.RUnlock()
	if !ok || t.now().After(r.Expiry) || client == nil {
		return nil, op.ErrInvalidRefreshToken
	}
	_, u, err := dir.find(ctx, r.user.Name)
	if err != nil {
		if errors.Is(err, errBadCredentials) {
			return nil, oidc.ErrInvalidGrant().WithDescription("the user can no longer sign in")
		}
		return nil, oidc.ErrServerError().WithDescription("the directory cannot be reached")
	}
	if u.Subject != r.user.Subject || !admitted(client, u) {
		return nil, oidc.ErrInvalidGrant().WithDescription("the user can no longer sign in to this app")
	}
	copied := *r
	copied.user = u
	return &copied, nil
}

// TerminateSession ends, at a client's sign-out, the user's tokens of that client and
// every session of the user at the issuer.
func (t *tenant) TerminateSession(_ context.Context, subject, clientID string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if subject != "" {
		for h, ss := range t.sessions {
			if ss.user.Subject == subject {
				delete(t.sessions, h)
			}
		}
	}
	for id, a := range t.tokens {
		if a.user.Subject == subject && a.ClientID == clientID {
			delete(t.tokens, id)
		}
	}
	for h, r := range t.refresh {
		if r.user.Subject == subject && r.ClientID == clientID {
			delete(t.refresh, h)
		}
	}
	return nil
}

func (t *tenant) RevokeToken(_ context.Context, tokenOrID, subject, clientID string) *oidc.Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.tokens[tokenOrID]; ok {
		if a.ClientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("the token belongs to another client")
		}
		delete(t.tokens, tokenOrID)
		return nil
	}
	h := sha256.Sum256([]byte(tokenOrID))
	if r, ok := t.refresh[h]; ok {
		if r.ClientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("the token belongs to another client")
		}
		delete(t.refresh, h)
	}
	return nil
}

func (t *tenant) GetRefreshTokenInfo(_ context.Context, clientID, token string) (string, string, error) {
	h := sha256.Sum256([]byte(token))
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.refresh[h]
	if !ok || r.ClientID != clientID {
		return "", "", op.ErrInvalidRefreshToken
	}
	return r.user.Subject, token, nil
}

func (t *tenant) SigningKey(context.Context) (op.SigningKey, error) {
	k, _, err := t.currentKeys()
	if err != nil {
		return nil, err
	}
	return opKey{k}, nil
}

func (t *tenant) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (t *tenant) KeySet(context.Context) ([]op.Key, error) {
	_, keys, err := t.currentKeys()
	if err != nil {
		return nil, err
	}
	out := make([]op.Key, 0, len(keys))
	for i := range keys {
		out = append(out, publicKey{opKey{&keys[i]}})
	}
	return out, nil
}

func (t *tenant) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.rec.Clients[id]
	if !ok {
		return nil, errNotFound
	}
	return opClient{c}, nil
}

func (t *tenant) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	t.mu.RLock()
	c, ok := t.rec.Clients[id]
	t.mu.RUnlock()
	if !ok || !c.secretMatches(secret) {
		return errors.New("unknown client or wrong secret")
	}
	return nil
}

// SetUserinfoFromScopes is deprecated in op; SetUserinfoFromRequest does the work.
func (t *tenant) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (t *tenant) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	_, u, _, _ := grantOf(req)
	fillUserinfo(info, u, scopes)
	return nil
}

func (t *tenant) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	t.mu.RLock()
	a, ok := t.tokens[tokenID]
	t.mu.RUnlock()
	if !ok || t.now().After(a.Expiry) {
		return errors.New("the access token has expired")
	}
	fillUserinfo(info, a.user, a.Scopes)
	return nil
}

func (t *tenant) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, _, clientID string) error {
	t.mu.RLock()
	a, ok := t.tokens[tokenID]
	t.mu.RUnlock()
	if !ok || t.now().After(a.Expiry) || a.ClientID != clientID {
		return errors.New("the token is not active")
	}
	info := new(oidc.UserInfo)
	fillUserinfo(info, a.user, a.Scopes)
	resp.SetUserInfo(info)
	resp.Active = true
	resp.ClientID = a.ClientID
	resp.Scope = a.Scopes
	resp.Expiration = oidc.FromTime(a.Expiry)
	return nil
}

func (t *tenant) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (t *tenant) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT client authentication is not offered")
}

func (t *tenant) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("the JWT profile grant is not offered")
}

func (t *tenant) Health(context.Context) error { return nil }

// fillUserinfo sets the claims of the scopes granted.
func fillUserinfo(info *oidc.UserInfo, u user, scopes []string) {
	info.Subject = u.Subject
	if slices.Contains(scopes, oidc.ScopeProfile) {
		info.PreferredUsername = u.Name
		info.Name = u.FullName
		info.GivenName = u.Given
		info.FamilyName = u.Family
	}
	if slices.Contains(scopes, oidc.ScopeEmail) && u.Email != "" {
		info.Email = u.Email
		// The operator enters the address in fedhost's own directory.
		info.EmailVerified = true
	}
	if slices.Contains(scopes, scopeGroups) {
		info.AppendClaims("groups", append([]string{}, u.Groups...))
	}
}

const scopeGroups = "groups"

// admitted reports whether u may sign in to c: c names no groups, or u is in one.
func admitted(c *clientRecord, u user) bool {
	if len(c.AllowedGroups) == 0 {
		return true
	}
	for _, g := range u.Groups {
		if slices.Contains(c.AllowedGroups, g) {
			return true
		}
	}
	return false
}

// opClient adapts a clientRecord to op.Client: a confidential web client using the code
// flow with refresh tokens, redirect URIs matched exactly.
type opClient struct{ c *clientRecord }

func (o opClient) GetID() string                       { return o.c.ID }
func (o opClient) RedirectURIs() []string              { return o.c.RedirectURIs }
func (o opClient) PostLogoutRedirectURIs() []string    { return nil }
func (o opClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (o opClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (o opClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (o opClient) LoginURL(id string) string            { return loginPath + "?id=" + id }
func (o opClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (o opClient) IDTokenLifetime() time.Duration       { return idTokenLifetime }
func (o opClient) DevMode() bool                        { return false }
func (o opClient) IsScopeAllowed(scope string) bool     { return slices.Contains(o.c.Scopes, scope) }
func (o opClient) IDTokenUserinfoClaimsAssertion() bool { return true }
func (o opClient) ClockSkew() time.Duration             { return 0 }
func (o opClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (o opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (o opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

var (
	_ op.Storage                   = (*tenant)(nil)
	_ op.CanSetUserinfoFromRequest = (*tenant)(nil)
	_ op.RefreshTokenRequest       = (*refreshToken)(nil)
	_ op.AuthRequest               = (*authRequest)(nil)
	_ op.Client                    = opClient{}
)
