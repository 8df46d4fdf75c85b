package api

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/limiter"

	"github.com/fedhost/fedhost/host/directory"
	"github.com/fedhost/fedhost/host/store"
)

// PasswordPage is the page of the UI where a user opens their link: the token follows
// in the fragment (#token), which browsers never send, so it is in no server's log.
const PasswordPage = "/set-password"

// DirectoryUser is a user of a deployment's directory as the API shows it.
type DirectoryUser struct {
	directory.User
	// PendingLink says the user has an unused invitation or reset link, and until when.
	PendingLink *PendingLink `json:"pending_link,omitempty"`
}

// PendingLink is an unused link, without its token.
type PendingLink struct {
	Purpose   string    `json:"purpose"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PasswordLink is a new link: mailed to the user when the deployment has a mail account
// and the user an address, else shown once (URL). fedhost keeps only its digest.
type PasswordLink struct {
	// URL is empty when the link was mailed.
	URL       string    `json:"url,omitempty"`
	Purpose   string    `json:"purpose"`
	ExpiresAt time.Time `json:"expires_at"`
	// SentTo is the address the link was mailed to.
	SentTo string `json:"sent_to,omitempty"`
	// MailError says why mailing the link failed; URL then shows it.
	MailError string `json:"mail_error,omitempty"`
}

// DirectoryGroup is a group of the directory with what the apps say it gives.
type DirectoryGroup struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
	// Roles are the app role groups of this name: which app, and what membership gives.
	Roles []GroupRole `json:"roles"`
}

// GroupRole is what one app's role group gives its members.
type GroupRole struct {
	App         string   `json:"app"`
	Description string   `json:"description"`
	Roles       []string `json:"roles,omitempty"`
}

// NewDirectoryUser is the body that adds a user.
type NewDirectoryUser struct {
	Name        string   `json:"name"`
	DisplayName string   `json:"display_name"`
	Email       string   `json:"email"`
	Groups      []string `json:"groups"`
}

// NewUserAnswer is the user added and its invitation link.
type NewUserAnswer struct {
	User DirectoryUser `json:"user"`
	Link PasswordLink  `json:"link"`
}

// UsePasswordLink is the body of the public call that sets a password with a link.
type UsePasswordLink struct {
	Token    string `json:"token"`
	Password string `json:"password"`
}

func (h *handlers) directoryOf(c *fiber.Ctx) (*directory.Directory, error) {
	res, pw, err := h.d.Engine.Directory(c.UserContext(), c.Params("id"))
	if err != nil {
		return nil, err
	}
	return directory.New(res, pw)
}

// NextAfterHeader carries the `after` of the next page of a deployment's users when more
// follow.
const NextAfterHeader = "X-Next-After"

// defaultUsersPage is a page of users when after is given without limit.
const defaultUsersPage = 100

func (h *handlers) listDirectoryUsers(c *fiber.Ctx) error {
	limit, err := queryInt(c, "limit", 0, 1, directory.MaxPage)
	if err != nil {
		return err
	}
	after := c.Query("after")
	dir, err := h.directoryOf(c)
	if err != nil {
		return err
	}
	var users []directory.User
	if limit == 0 && after == "" {
		users, err = dir.Users()
	} else {
		if limit == 0 {
			limit = defaultUsersPage
		}
		var more bool
		users, more, err = dir.UsersPage(after, limit)
		if more {
			c.Set(NextAfterHeader, users[len(users)-1].Name)
		}
	}
	if err != nil {
		return err
	}
	pending, err := h.d.Store.PendingPasswordLinks(c.UserContext(), c.Params("id"), time.Now())
	if err != nil {
		return err
	}
	out := make([]DirectoryUser, len(users))
	for i, u := range users {
		out[i] = withLink(u, pending)
	}
	return c.JSON(out)
}

func withLink(u directory.User, pending map[string]store.PasswordLink) DirectoryUser {
	du := DirectoryUser{User: u}
	if l, ok := pending[u.Name]; ok {
		du.PendingLink = &PendingLink{Purpose: l.Purpose, ExpiresAt: l.ExpiresAt}
	}
	return du
}

func (h *handlers) listDirectoryGroups(c *fiber.Ctx) error {
	dir, err := h.directoryOf(c)
	if err != nil {
		return err
	}
	groups, err := dir.Groups()
	if err != nil {
		return err
	}
	roles := h.roleGroups(c.UserContext())
	out := make([]DirectoryGroup, len(groups))
	for i, g := range groups {
		out[i] = DirectoryGroup{Name: g.Name, Members: g.Members, Roles: roles[g.Name]}
		if out[i].Roles == nil {
			out[i].Roles = []GroupRole{}
		}
	}
	return c.JSON(out)
}

// roleGroups asks every app of the catalog for its role groups, by group name; an app
// that does not answer offers none.
func (h *handlers) roleGroups(ctx context.Context) map[string][]GroupRole {
	out := map[string][]GroupRole{}
	cat := h.d.Engine.Catalog()
	if cat == nil {
		return out
	}
	for _, a := range cat.Apps() {
		p, err := a.Plugin.Client()
		if err != nil || p.App() == nil {
			continue
		}
		groups, err := p.App().RoleGroups(ctx)
		if err != nil {
			h.log(nil, "asking app "+a.Name+" for its role groups", err)
			continue
		}
		for _, g := range groups {
			out[g.Name] = append(out[g.Name], GroupRole{App: a.Name, Description: g.Description, Roles: g.Roles})
		}
	}
	for _, rs := range out {
		sort.Slice(rs, func(i, j int) bool { return rs[i].App < rs[j].App })
	}
	return out
}

func (h *handlers) addDirectoryUser(c *fiber.Ctx) error {
	var body NewDirectoryUser
	if err := c.BodyParser(&body); err != nil {
		return &directory.Error{Code: directory.CodeInvalid, Field: "body", Message: `send {"name": ..., "display_name": ..., "email": ..., "groups": [...]}`}
	}
	c.Locals("subject", boundedSubject(body.Name))
	dir, err := h.directoryOf(c)
	if err != nil {
		return err
	}
	u := directory.User{Name: body.Name, DisplayName: body.DisplayName, Email: body.Email, Groups: body.Groups}
	if u.Groups == nil {
		u.Groups = []string{}
	}
	if err := dir.Add(u); err != nil {
		return err
	}
	if len(u.Groups) > 0 {
		h.syncRoles(c)
	}
	link, err := h.newPasswordLink(c, body.Name, body.Email, store.LinkInvitation)
	if err != nil {
		return err
	}
	added, err := dir.User(body.Name)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(NewUserAnswer{User: DirectoryUser{User: added, PendingLink: &PendingLink{Purpose: link.Purpose, ExpiresAt: link.ExpiresAt}}, Link: link})
}

// boundedSubject keeps a name sent by a caller to what the audit trail may hold: a
// valid user name, or nothing.
func boundedSubject(name string) string {
	if directory.CheckName("name", name) != nil {
		return ""
	}
	return name
}

// directoryUserChange runs change on the directory and the user the route names.
func (h *handlers) directoryUserChange(change func(c *fiber.Ctx, dir *directory.Directory, name string) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		name := c.Params("user")
		c.Locals("subject", boundedSubject(name))
		dir, err := h.directoryOf(c)
		if err != nil {
			return err
		}
		return change(c, dir, name)
	}
}

func (h *handlers) setDirectoryUserDisabled(disabled bool) fiber.Handler {
	return h.directoryUserChange(func(c *fiber.Ctx, dir *directory.Directory, name string) error {
		if err := dir.SetDisabled(name, disabled); err != nil {
			return err
		}
		h.syncRoles(c)
		return h.answerUser(c, dir, name)
	})
}

func (h *handlers) answerUser(c *fiber.Ctx, dir *directory.Directory, name string) error {
	u, err := dir.User(name)
	if err != nil {
		return err
	}
	pending, err := h.d.Store.PendingPasswordLinks(c.UserContext(), c.Params("id"), time.Now())
	if err != nil {
		return err
	}
	return c.JSON(withLink(u, pending))
}

func (h *handlers) deleteDirectoryUser() fiber.Handler {
	return h.directoryUserChange(func(c *fiber.Ctx, dir *directory.Directory, name string) error {
		if err := dir.Delete(name); err != nil {
			return err
		}
		h.syncRoles(c)
		if err := h.d.Store.DeletePasswordLinks(c.UserContext(), c.Params("id"), name); err != nil {
			return err
		}
		return c.SendStatus(fiber.StatusNoContent)
	})
}

func (h *handlers) resetDirectoryUser() fiber.Handler {
	return h.directoryUserChange(func(c *fiber.Ctx, dir *directory.Directory, name string) error {
		u, err := dir.User(name)
		if err != nil {
			return err
		}
		link, err := h.newPasswordLink(c, name, u.Email, store.LinkReset)
		if err != nil {
			return err
		}
		return c.Status(fiber.StatusCreated).JSON(link)
	})
}

func (h *handlers) setDirectoryMembership(member bool) fiber.Handler {
	return h.directoryUserChange(func(c *fiber.Ctx, dir *directory.Directory, name string) error {
		var err error
		if member {
			err = dir.AddToGroup(name, c.Params("group"))
		} else {
			err = dir.RemoveFromGroup(name, c.Params("group"))
		}
		if err != nil {
			return err
		}
		h.syncRoles(c)
		return h.answerUser(c, dir, name)
	})
}

// syncRoles queues the sync of the apps' roles after a change of the route's
// deployment's directory. The change stands when it fails: the failure is an audit
// event, and the scheduler's tick syncs again.
func (h *handlers) syncRoles(c *fiber.Ctx) {
	cl, _ := callerOf(c)
	if _, err := h.d.Engine.SyncRoles(c.UserContext(), c.Params("id"), cl.user.Name); err != nil {
		h.log(c, "queuing the sync of the apps' roles", err)
	}
}

// newPasswordLink makes a one-time link for a user of the route's deployment and mails
// it to email through the deployment's mail account; without either, or when the mail
// fails (MailError says why), the link goes back to the operator, once.
func (h *handlers) newPasswordLink(c *fiber.Ctx, name, email, purpose string) (PasswordLink, error) {
	cl, _ := callerOf(c)
	ctx := c.UserContext()
	token, expires, err := h.d.links().Issue(ctx, c.Params("id"), name, purpose, cl.user.ID)
	if err != nil {
		return PasswordLink{}, err
	}
	base, _ := h.d.publicBase(c)
	link := PasswordLink{URL: base + PasswordPage + "#" + token, Purpose: purpose, ExpiresAt: expires}
	sent, err := directory.MailLink(ctx, h.d.Engine.Mail, c.Params("id"), directory.LinkMail{To: email, URL: link.URL, Purpose: purpose, Expires: expires})
	switch {
	case err != nil:
		link.MailError = err.Error()
	case sent:
		link.URL, link.SentTo = "", email
	}
	return link, nil
}

// passwordLinkLimit lets one address try 10 links a minute: with 256-bit tokens this is
// no guess at all, and it keeps a flood of refusals out of the audit trail.
func passwordLinkLimit() fiber.Handler {
	return limiter.New(limiter.Config{Max: 10, Expiration: time.Minute, LimitReached: func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderRetryAfter, "60")
		return &refused{status: fiber.StatusTooManyRequests, code: "rate_limited", message: "too many tries from this address: wait a minute and try again"}
	}})
}

var errCrossSite = &refused{status: fiber.StatusForbidden, code: "authz_denied", message: "a password is set from fedhost's own page only"}

var errBadLink = &refused{status: fiber.StatusNotFound, code: "link_invalid", message: directory.ErrBadLink.Error()}

// usePasswordLink sets the password of a link's user, once. It is public: the token is
// the credential, and the route's rate limit bounds guessing.
func (h *handlers) usePasswordLink(c *fiber.Ctx) error {
	if crossSite(c) {
		return errCrossSite
	}
	var body UsePasswordLink
	if err := c.BodyParser(&body); err != nil {
		return &directory.Error{Code: directory.CodeInvalid, Field: "body", Message: `send {"token": ..., "password": ...}`}
	}
	ctx := c.UserContext()
	links := h.d.links()
	l, err := links.Find(ctx, body.Token)
	if errors.Is(err, directory.ErrBadLink) {
		return errBadLink
	}
	if err != nil {
		return err
	}
	if err := directory.CheckPassword("password", body.Password); err != nil {
		return err
	}
	c.Locals("deployment", l.DeploymentID)
	c.Locals("subject", l.UserName)
	res, pw, err := h.d.Engine.Directory(ctx, l.DeploymentID)
	if err != nil {
		return err
	}
	dir, err := directory.New(res, pw)
	if err != nil {
		return err
	}
	if err := links.Use(ctx, l, dir, body.Password); errors.Is(err, directory.ErrBadLink) {
		return errBadLink
	} else if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
