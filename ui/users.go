package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"sort"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/limiter"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/store"
)

// setPasswordPath is the public page where a user opens an invitation or reset link;
// the token comes in the fragment (#token), which no browser sends to a server.
const setPasswordPath = "/set-password"

// linkCSRFCookie carries the set-password form's token, which the form repeats: the page
// has no session to keep it in.
const linkCSRFCookie = "fedhost_link_csrf"

type usersData struct {
	D      store.Deployment
	Users  []directory.User
	Groups []groupOffer
	// Pending is, by user name, the purpose and expiry of an unused link.
	Pending map[string]store.PasswordLink
	// Link is a link just made, shown this once, for LinkUser; SentTo is the address it
	// was mailed to instead, MailError why mailing it failed.
	Link, LinkUser    string
	LinkExpires       time.Time
	SentTo, MailError string
	// Field is the form field the error is about.
	Field string
	// Form is what the add form sent, shown again when it was refused.
	Form directory.User
}

// groupOffer is a group of the directory with what the apps say it gives.
type groupOffer struct {
	Name  string
	Gives []string
}

func (u *UI) links() directory.Links {
	return directory.Links{Store: u.d.Store, TTL: u.d.PasswordLinkTTL}
}

// directoryOf opens d's directory.
func (u *UI) directoryOf(s *session, d store.Deployment) (*directory.Directory, error) {
	res, pw, err := u.d.Engine.Directory(s.ctx, d.ID)
	if err != nil {
		return nil, err
	}
	return directory.New(res, pw)
}

func (u *UI) usersPage(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	return u.showUsers(c, s, d, fiber.StatusOK, usersData{})
}

// showUsers renders the users page of d with data's link, error field and form.
func (u *UI) showUsers(c *fiber.Ctx, s *session, d store.Deployment, status int, data usersData) error {
	return u.showUsersError(c, s, d, status, data, "")
}

func (u *UI) showUsersError(c *fiber.Ctx, s *session, d store.Deployment, status int, data usersData, message string) error {
	data.D = d
	dir, err := u.directoryOf(s, d)
	var de *deploy.Error
	if errors.As(err, &de) && de.Code == deploy.CodeNotFound {
		v := u.view(s, "Users of "+d.Name, "deployments", data)
		v.Error = "This deployment has no directory of users yet: its hosting provider's environment needs an ldap provider, and the deployment a build since."
		return u.render(c, fiber.StatusNotFound, "users", v)
	}
	if err != nil {
		return err
	}
	if data.Users, err = dir.Users(); err != nil {
		return err
	}
	groups, err := dir.Groups()
	if err != nil {
		return err
	}
	gives := u.roleGroups(s)
	for _, g := range groups {
		data.Groups = append(data.Groups, groupOffer{Name: g.Name, Gives: gives[g.Name]})
	}
	if data.Pending, err = u.d.Store.PendingPasswordLinks(s.ctx, d.ID, time.Now()); err != nil {
		return err
	}
	v := u.view(s, "Users of "+d.Name, "deployments", data)
	v.Error = message
	return u.render(c, status, "users", v)
}

// roleGroups is, by group name, what the catalog's apps say their role groups give.
func (u *UI) roleGroups(s *session) map[string][]string {
	out := map[string][]string{}
	cat := u.d.Engine.Catalog()
	if cat == nil {
		return out
	}
	for _, a := range cat.Apps() {
		p, err := a.Plugin.Client()
		if err != nil || p.App() == nil {
			continue
		}
		groups, err := p.App().RoleGroups(s.ctx)
		if err != nil {
			continue
		}
		for _, g := range groups {
			out[g.Name] = append(out[g.Name], a.Name+": "+g.Description)
		}
	}
	for _, g := range out {
		sort.Strings(g)
	}
	return out
}

// recordUser records a change of a directory user.
func (u *UI) recordUser(s *session, action string, d store.Deployment, name string, err error) error {
	e := audit.Event{Action: action, DeploymentID: d.ID, Subject: name, Result: audit.ResultOK}
	var dirErr *directory.Error
	switch {
	case err == nil:
	case errors.As(err, &dirErr):
		e.Result, e.Reason = audit.ResultInvalid, dirErr.Code+" at /"+dirErr.Field
		if dirErr.Field == "name" && directory.CheckName("name", name) != nil {
			e.Subject = ""
		}
	default:
		e.Result, e.Reason = audit.ResultError, "internal"
	}
	return u.record(s.ctx, e)
}

// userRefused shows the users page with a refusal of the directory, or fails.
func (u *UI) userRefused(c *fiber.Ctx, s *session, d store.Deployment, data usersData, err error) error {
	var dirErr *directory.Error
	if !errors.As(err, &dirErr) {
		return err
	}
	status := map[string]int{directory.CodeInvalid: fiber.StatusBadRequest, directory.CodeConflict: fiber.StatusConflict, directory.CodeNotFound: fiber.StatusNotFound}[dirErr.Code]
	data.Field = dirErr.Field
	return u.showUsersError(c, s, d, status, data, "Refused: "+dirErr.Message+".")
}

func (u *UI) addUser(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "directory_user.add")
	if err != nil {
		return err
	}
	dir, err := u.directoryOf(s, d)
	if err != nil {
		return err
	}
	nu := directory.User{Name: c.FormValue("name"), DisplayName: c.FormValue("display_name"), Email: c.FormValue("email"), Groups: []string{}}
	for _, g := range c.Context().PostArgs().PeekMulti("groups") {
		nu.Groups = append(nu.Groups, string(g))
	}
	err = dir.Add(nu)
	if rerr := u.recordUser(s, "directory_user.add", d, nu.Name, err); rerr != nil {
		return rerr
	}
	if err != nil {
		return u.userRefused(c, s, d, usersData{Form: nu}, err)
	}
	if len(nu.Groups) > 0 {
		u.syncRoles(s, d)
	}
	return u.issueLink(c, s, d, nu.Name, nu.Email, store.LinkInvitation, fiber.StatusCreated)
}

// issueLink makes a link for name and mails it to email through the deployment's mail
// account, or shows it once on the users page: without either, or when the mail fails.
func (u *UI) issueLink(c *fiber.Ctx, s *session, d store.Deployment, name, email, purpose string, status int) error {
	token, expires, err := u.links().Issue(s.ctx, d.ID, name, purpose, s.ID)
	if err != nil {
		return err
	}
	base, _ := u.publicBase(c)
	data := usersData{Link: base + setPasswordPath + "#" + token, LinkUser: name, LinkExpires: expires}
	sent, err := directory.MailLink(s.ctx, u.d.Engine.Mail, d.ID, directory.LinkMail{To: email, URL: data.Link, Purpose: purpose, Expires: expires})
	switch {
	case err != nil:
		data.MailError = err.Error()
	case sent:
		data.Link, data.SentTo = "", email
	}
	return u.showUsers(c, s, d, status, data)
}

// changeUser disables, enables, deletes or resets a user.
func (u *UI) changeUser(c *fiber.Ctx, s *session) error {
	change := c.Params("change")
	action := map[string]string{"disable": "directory_user.disable", "enable": "directory_user.enable", "delete": "directory_user.delete", "reset": "directory_user.reset"}[change]
	if action == "" {
		return fiber.ErrNotFound
	}
	d, err := u.ownDeployment(s, c.Params("id"), action)
	if err != nil {
		return err
	}
	dir, err := u.directoryOf(s, d)
	if err != nil {
		return err
	}
	name := c.Params("user")
	var email string
	switch change {
	case "disable", "enable":
		err = dir.SetDisabled(name, change == "disable")
	case "delete":
		if err = dir.Delete(name); err == nil {
			err = u.d.Store.DeletePasswordLinks(s.ctx, d.ID, name)
		}
	case "reset":
		var user directory.User
		user, err = dir.User(name)
		email = user.Email
	}
	if rerr := u.recordUser(s, action, d, name, err); rerr != nil {
		return rerr
	}
	if err != nil {
		return u.userRefused(c, s, d, usersData{}, err)
	}
	if change == "reset" {
		return u.issueLink(c, s, d, name, email, store.LinkReset, fiber.StatusOK)
	}
	u.syncRoles(s, d)
	return c.Redirect("/deployments/"+d.ID+"/users", fiber.StatusSeeOther)
}

// changeMembership puts a user in a group (op add) or takes them out (op remove).
func (u *UI) changeMembership(c *fiber.Ctx, s *session) error {
	add := c.FormValue("op") == "add"
	action := "directory_user.group_remove"
	if add {
		action = "directory_user.group_add"
	}
	d, err := u.ownDeployment(s, c.Params("id"), action)
	if err != nil {
		return err
	}
	dir, err := u.directoryOf(s, d)
	if err != nil {
		return err
	}
	name, group := c.Params("user"), c.FormValue("group")
	if add {
		err = dir.AddToGroup(name, group)
	} else {
		err = dir.RemoveFromGroup(name, group)
	}
	if rerr := u.recordUser(s, action, d, name, err); rerr != nil {
		return rerr
	}
	if err != nil {
		return u.userRefused(c, s, d, usersData{}, err)
	}
	u.syncRoles(s, d)
	return c.Redirect("/deployments/"+d.ID+"/users", fiber.StatusSeeOther)
}

// syncRoles queues the sync of the apps' roles after a change of d's directory. The
// change stands when it fails: SyncRoles records the failure as an audit event, and the
// scheduler's tick syncs again.
func (u *UI) syncRoles(s *session, d store.Deployment) {
	_, _ = u.d.Engine.SyncRoles(s.ctx, d.ID, s.Name)
}

// public shows the error of a page without a session as a page.
func (u *UI) public(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := h(c); err != nil {
			return u.failure(c, nil, err)
		}
		return nil
	}
}

type setPasswordData struct {
	CSRF string
	Done bool
	// Field is the field the error is about.
	Field string
}

// setPasswordLimit lets one address send the set-password form 10 times a minute.
func (u *UI) setPasswordLimit() fiber.Handler {
	return limiter.New(limiter.Config{Max: 10, Expiration: time.Minute,
		LimitReached: func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderRetryAfter, "60")
			return u.renderSetPassword(c, fiber.StatusTooManyRequests, setPasswordData{}, "Too many tries from this address: wait a minute and try again.")
		}})
}

// setPasswordPage is the public form where a user chooses a password with their link. It
// sets a fresh form token in a cookie, which the form's post must repeat.
func (u *UI) setPasswordPage(c *fiber.Ctx) error {
	return u.renderSetPassword(c, fiber.StatusOK, setPasswordData{}, "")
}

func (u *UI) renderSetPassword(c *fiber.Ctx, status int, data setPasswordData, message string) error {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	data.CSRF = base64.RawURLEncoding.EncodeToString(b)
	c.Cookie(&fiber.Cookie{Name: linkCSRFCookie, Value: data.CSRF, Path: setPasswordPath, HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode, Secure: c.Protocol() == "https"})
	v := u.view(nil, "Choose your password", "", data)
	v.Error = message
	return u.render(c, status, "set_password", v)
}

// setPassword sets the password of a link's user, once.
func (u *UI) setPassword(c *fiber.Ctx) error {
	cookie := c.Cookies(linkCSRFCookie)
	if cookie == "" || subtle.ConstantTimeCompare([]byte(cookie), []byte(c.FormValue("csrf"))) != 1 {
		return u.renderSetPassword(c, fiber.StatusForbidden, setPasswordData{}, "This form was not sent from its page. Open your link again and choose your password there.")
	}
	ctx := audit.WithActor(c.UserContext(), audit.Actor{ClientIP: c.IP()})
	links := u.links()
	link, err := links.Find(ctx, c.FormValue("token"))
	if errors.Is(err, directory.ErrBadLink) {
		return u.renderSetPassword(c, fiber.StatusNotFound, setPasswordData{}, "This link is unknown, used already or expired: ask whoever manages your account for a new one.")
	}
	if err != nil {
		return err
	}
	password := c.FormValue("password")
	if password != c.FormValue("confirm") {
		return u.renderSetPassword(c, fiber.StatusBadRequest, setPasswordData{Field: "confirm"}, "The two passwords differ: type the same one twice.")
	}
	res, pw, err := u.d.Engine.Directory(ctx, link.DeploymentID)
	if err != nil {
		return err
	}
	dir, err := directory.New(res, pw)
	if err != nil {
		return err
	}
	err = links.Use(ctx, link, dir, password)
	e := audit.Event{Action: "directory_user.set_password", DeploymentID: link.DeploymentID, Subject: link.UserName, Result: audit.ResultOK, ClientIP: c.IP()}
	var dirErr *directory.Error
	switch {
	case err == nil:
	case errors.As(err, &dirErr):
		e.Result, e.Reason = audit.ResultInvalid, dirErr.Code+" at /"+dirErr.Field
	case errors.Is(err, directory.ErrBadLink):
		e.Result, e.Reason = audit.ResultInvalid, "link_invalid"
	default:
		e.Result, e.Reason = audit.ResultError, "internal"
	}
	if rerr := u.record(ctx, e); rerr != nil {
		return rerr
	}
	switch {
	case dirErr != nil:
		return u.renderSetPassword(c, fiber.StatusBadRequest, setPasswordData{Field: dirErr.Field}, dirErr.Message+".")
	case errors.Is(err, directory.ErrBadLink):
		return u.renderSetPassword(c, fiber.StatusNotFound, setPasswordData{}, "This link is unknown, used already or expired: ask whoever manages your account for a new one.")
	case err != nil:
		return err
	}
	return u.renderSetPassword(c, fiber.StatusOK, setPasswordData{Done: true}, "")
}
