package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/store"
)

// TestGeneratedPasswordIsChangedFirst: after a reset (as after the first start) the user
// signs in and is sent to change the password before any other page (issue 10, item 11).
func TestGeneratedPasswordIsChangedFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	password, err := b.auth.ResetPassword(context.Background(), "alice")
	require.NoError(t, err)
	anon := &client{b: b}
	res, _ := anon.login(t, url.Values{"name": {"alice"}, "password": {password}, "next": {"/deployments/new"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	alice := &client{b: b, cookie: cookieOf(res, "fedhost_session").Value}

	for _, path := range []string{"/deployments", "/deployments/new", "/account", "/admin/operators"} {
		res, _ := alice.get(t, path)
		require.Equal(t, http.StatusSeeOther, res.StatusCode, path)
		require.Equal(t, "/account/password", res.Header.Get("Location"), path)
	}
	res, page := alice.get(t, "/account/password")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Choose your own before")
	requireLabelled(t, page)
	alice.csrf = regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)[1]
	res, _ = alice.post(t, "/deployments/new", url.Values{"namespace": {"sneaky"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "a form elsewhere is not taken either")
	require.Equal(t, "/account/password", res.Header.Get("Location"))

	res, page = alice.post(t, "/account/password", url.Values{"current_password": {"wrong"}, "new_password": {"correct horse battery"}, "confirm_password": {"correct horse battery"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, page, "The current password is wrong")
	require.Contains(t, page, `id="current-password" name="current_password" type="password" autocomplete="current-password" required aria-invalid="true"`)
	res, page = alice.post(t, "/account/password", url.Values{"current_password": {password}, "new_password": {"correct horse battery"}, "confirm_password": {"correct horse batteries"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, page, "The two new passwords differ")
	res, page = alice.post(t, "/account/password", url.Values{"current_password": {password}, "new_password": {"short"}, "confirm_password": {"short"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, page, "at least 12 characters")
	require.NotContains(t, page, password)

	res, _ = alice.post(t, "/account/password", url.Values{"current_password": {password}, "new_password": {"correct horse battery"}, "confirm_password": {"correct horse battery"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/account?password=changed", res.Header.Get("Location"))
	res, page = alice.get(t, "/account?password=changed")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "Your password is changed")
	res, _ = alice.get(t, "/deployments")
	require.Equal(t, http.StatusOK, res.StatusCode, "this session goes on")
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "user.change_password", Result: string(audit.ResultOK), Actor: b.users["alice"].ID}))
}

// TestOperatorsPageTakesAccessAway: a superuser disables, resets and deletes accounts and
// revokes their tokens with the buttons of the Operators page (issue 18, defect 4).
func TestOperatorsPageTakesAccessAway(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	root, alice, bob := b.as(t, "root"), b.as(t, "alice"), b.as(t, "bob")
	aliceToken, tok, err := b.auth.NewToken(ctx, b.users["alice"].ID, "feed importer", time.Hour)
	require.NoError(t, err)

	res, page := root.get(t, "/admin/operators")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `action="/admin/operators/alice/disable"`)
	require.NotContains(t, page, `action="/admin/operators/root/disable"`, "no buttons against oneself")
	requireLabelled(t, page)

	res, _ = root.post(t, "/admin/operators/alice/disable", url.Values{"csrf": {"forged"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "the CSRF token is needed")
	res, _ = alice.post(t, "/admin/operators/bob/disable", url.Values{})
	require.Equal(t, http.StatusForbidden, res.StatusCode, "an operator may not")

	res, page = root.post(t, "/admin/operators/alice/disable", url.Values{})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "alice is disabled")
	res, _ = alice.get(t, "/deployments")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "alice's session ended")
	_, err = b.auth.TokenOwner(ctx, aliceToken)
	require.Error(t, err, "and its token")
	res, _ = root.post(t, "/admin/operators/alice/enable", url.Values{})
	require.Equal(t, http.StatusOK, res.StatusCode)

	res, page = root.post(t, "/admin/operators/root/disable", url.Values{})
	require.Equal(t, http.StatusConflict, res.StatusCode)
	require.Contains(t, page, "your own account")

	// The operator page lists the tokens, and revokes one.
	_, tok, err = b.auth.NewToken(ctx, b.users["bob"].ID, "feed importer", time.Hour)
	require.NoError(t, err)
	res, page = root.get(t, "/admin/operators/bob")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "feed importer")
	require.Contains(t, page, "never")
	res, page = root.post(t, "/admin/operators/bob/tokens/"+tok.ID+"/revoke", url.Values{})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "is revoked")
	res, _ = root.post(t, "/admin/operators/alice/tokens/"+tok.ID+"/revoke", url.Values{})
	require.Equal(t, http.StatusNotFound, res.StatusCode, "a token is revoked only under its owner")

	// Delete: typed name, no deployments left.
	b.create(t, "bob", "bob-feeds")
	res, page = root.post(t, "/admin/operators/bob/delete", url.Values{})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, page, "type its user name")
	res, page = root.post(t, "/admin/operators/bob/delete", url.Values{"confirm": {"bob"}})
	require.Equal(t, http.StatusConflict, res.StatusCode)
	require.Contains(t, page, "bob owns 1 deployments that are not destroyed")
	res, page = root.post(t, "/admin/operators/alice/delete", url.Values{"confirm": {"alice"}})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "alice is deleted")

	// A reset shows the password once.
	res, page = root.post(t, "/admin/operators/bob/reset-password", url.Values{})
	require.Equal(t, http.StatusOK, res.StatusCode)
	m := regexp.MustCompile(`id="reset-password" type="text" readonly value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, m, "the new password is shown")
	res, _ = bob.get(t, "/deployments")
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the reset ended bob's session")
	u, err := b.auth.Authenticate(ctx, "bob", m[1], "192.0.2.1")
	require.NoError(t, err)
	require.True(t, u.MustChangePassword)

	for _, action := range []string{"user.disable", "user.enable", "token.revoke", "user.delete", "user.reset_password"} {
		require.True(t, b.hasEvent(t, store.AuditEvent{Action: action, Result: string(audit.ResultOK), Actor: b.users["root"].ID}), action)
	}
}

// TestAccountPageRevokesOwnTokens: an operator sees its tokens, never their values, and
// revokes its own but not another's.
func TestAccountPageRevokesOwnTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	alice := b.as(t, "alice")
	value, mine, err := b.auth.NewToken(ctx, b.users["alice"].ID, "backup script", time.Hour)
	require.NoError(t, err)
	_, bobs, err := b.auth.NewToken(ctx, b.users["bob"].ID, "bobs importer", time.Hour)
	require.NoError(t, err)

	res, page := alice.get(t, "/account")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "backup script")
	require.NotContains(t, page, value)
	require.NotContains(t, page, "bobs importer")
	res, _ = alice.post(t, "/account/tokens/"+bobs.ID+"/revoke", url.Values{})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.True(t, b.hasEvent(t, store.AuditEvent{Action: "token.revoke", Result: string(audit.ResultDenied), Actor: b.users["alice"].ID}))
	res, page = alice.post(t, "/account/tokens/"+mine.ID+"/revoke", url.Values{})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "is revoked")
	_, err = b.auth.TokenOwner(ctx, value)
	require.Error(t, err)
}
