package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/headers"
	"github.com/fedhost/fedhost/host/store"
)

// The methods of Terraform's http state backend that are not HTTP's own.
const (
	MethodLock   = "LOCK"
	MethodUnlock = "UNLOCK"
)

// terraformStatePath is the state of one workspace of the terraform provider.
const terraformStatePath = "/api/v1/terraform/state/:tenant/:instance"

// maxLockInfo bounds the lock Terraform sends, kept as it came (its ID, who, when, what).
const (
	maxLockInfo = 4 << 10
	maxLockID   = 128
)

var workspaceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// mountTerraformState serves Terraform's http backend for the terraform provider, outside
// the operators' authentication: each workspace opens with its own token only.
func mountTerraformState(app *fiber.App, d Deps) {
	h := &terraformState{d: d}
	guard := []fiber.Handler{headers.Middleware(headers.DataCSP), h.authorize}
	app.Get(terraformStatePath, append(guard, h.get)...)
	app.Post(terraformStatePath, append(guard, h.put)...)
	app.Delete(terraformStatePath, append(guard, h.delete)...)
	app.Add(MethodLock, terraformStatePath, append(guard, h.lock)...)
	app.Add(MethodUnlock, terraformStatePath, append(guard, h.unlock)...)
}

type terraformState struct{ d Deps }

// authorize lets through a request whose Basic password is the token of the workspace
// its path names.
func (h *terraformState) authorize(c *fiber.Ctx) error {
	if h.d.TerraformState == nil {
		return &refused{status: fiber.StatusNotFound, code: "not_found",
			message: "this host keeps no terraform states: it starts the terraform provider with state_address and state_key when it serves them"}
	}
	tenant, instance := c.Params("tenant"), c.Params("instance")
	if !workspaceName.MatchString(tenant) || !workspaceName.MatchString(instance) {
		return &refused{status: fiber.StatusBadRequest, code: "bad_request",
			message: "the path names no workspace: /api/v1/terraform/state/{tenant}/{instance}, each DNS-safe, at most 63 characters"}
	}
	token, ok := basicPassword(c.Get(fiber.HeaderAuthorization))
	if !ok {
		c.Set(fiber.HeaderWWWAuthenticate, `Basic realm="fedhost terraform state"`)
		return &refused{status: fiber.StatusUnauthorized, code: "unauthenticated",
			message: "a terraform state needs its workspace's token as the Basic password (TF_HTTP_PASSWORD): the terraform provider mints it from state_key"}
	}
	if !h.d.TerraformState.Opens(token, tenant, instance) {
		return &refused{status: fiber.StatusForbidden, code: "authz_denied",
			message: "this token does not open this workspace: each workspace has its own, minted from the host's state_key for its tenant and instance"}
	}
	if c.Method() != fiber.MethodGet && len(c.Body()) > 0 && !isJSON(c) {
		return errNotJSON
	}
	return c.Next()
}

func basicPassword(header string) (string, bool) {
	enc, ok := strings.CutPrefix(header, "Basic ")
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	_, password, ok := strings.Cut(string(raw), ":")
	return password, ok && password != ""
}

// get answers the state, 204 when the workspace has none yet.
func (h *terraformState) get(c *fiber.Ctx) error {
	st, err := h.d.Store.TerraformStateOf(c.UserContext(), c.Params("tenant"), c.Params("instance"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && st.Sealed == "") {
		return c.SendStatus(fiber.StatusNoContent)
	}
	if err != nil {
		return err
	}
	state, err := h.d.TerraformState.Open(st.Sealed)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(state)
}

// put stores the state Terraform sends; while the workspace is locked, only with the
// lock's ID in the query (?ID=), as Terraform sends it.
func (h *terraformState) put(c *fiber.Ctx) error {
	body := c.Body()
	if !json.Valid(body) {
		return &refused{status: fiber.StatusBadRequest, code: "bad_request", message: "the body is not a Terraform state: send the state's JSON"}
	}
	sealed, err := h.d.TerraformState.Seal(body)
	if err != nil {
		return err
	}
	return h.answer(c, h.d.Store.PutTerraformState(c.UserContext(), c.Params("tenant"), c.Params("instance"), sealed, c.Query("ID")))
}

func (h *terraformState) delete(c *fiber.Ctx) error {
	return h.answer(c, h.d.Store.DeleteTerraformState(c.UserContext(), c.Params("tenant"), c.Params("instance"), c.Query("ID")))
}

// lockInfo is the part of Terraform's lock the host reads.
type lockInfo struct {
	ID string `json:"ID"`
}

func readLock(c *fiber.Ctx) (lockInfo, error) {
	var l lockInfo
	body := c.Body()
	if len(body) == 0 {
		return l, nil
	}
	if len(body) > maxLockInfo {
		return l, &refused{status: fiber.StatusRequestEntityTooLarge, code: "body_too_large", message: "the lock is larger than 4 KiB: send Terraform's lock info only"}
	}
	if err := json.Unmarshal(body, &l); err != nil || len(l.ID) > maxLockID {
		return l, &refused{status: fiber.StatusBadRequest, code: "bad_request", message: "the body is not a Terraform lock: send its lock info, with an ID of at most 128 characters"}
	}
	return l, nil
}

// lock takes the workspace's lock; one held answers 423 with the holder's lock info.
func (h *terraformState) lock(c *fiber.Ctx) error {
	l, err := readLock(c)
	if err != nil {
		return err
	}
	if l.ID == "" {
		return &refused{status: fiber.StatusBadRequest, code: "bad_request", message: "a lock needs its ID: send Terraform's lock info"}
	}
	err = h.d.Store.LockTerraformState(c.UserContext(), c.Params("tenant"), c.Params("instance"), l.ID, string(c.Body()))
	var held *store.TerraformLockedError
	if errors.As(err, &held) {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(fiber.StatusLocked).SendString(held.Info)
	}
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusOK)
}

// unlock releases the lock the body names; a body without an ID (terraform force-unlock)
// releases whatever lock is held.
func (h *terraformState) unlock(c *fiber.Ctx) error {
	l, err := readLock(c)
	if err != nil {
		return err
	}
	return h.answer(c, h.d.Store.UnlockTerraformState(c.UserContext(), c.Params("tenant"), c.Params("instance"), l.ID))
}

// answer is 200, or 409 with the lock that is held.
func (h *terraformState) answer(c *fiber.Ctx, err error) error {
	var held *store.TerraformLockedError
	if errors.As(err, &held) {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(fiber.StatusConflict).SendString(held.Info)
	}
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusOK)
}
