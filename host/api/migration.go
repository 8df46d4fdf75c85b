package api

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/input"
	"github.com/fedhost/fedhost/host/migration"
)

// importPath is the route of an import; its body holds a whole migration string.
const importPath = "/deployments/import"

// importBody bounds an import's body: the string and room for the other fields.
const importBody = migration.MaxLen + 4<<10

func (h *handlers) migrationRoutes(r fiber.Router) {
	h.route(r, fiber.MethodGet, "/migration/recipient", Public, "", h.migrationRecipient)
	h.route(r, fiber.MethodPost, importPath, Signed, "deployment.import", h.importDeployment)
}

// Recipient is the age recipient sources encrypt migration strings to.
type Recipient struct {
	Recipient string `json:"recipient"`
}

func (h *handlers) migrationRecipient(c *fiber.Ctx) error {
	if h.d.Migration == nil {
		return fiber.ErrNotFound
	}
	return c.JSON(Recipient{Recipient: h.d.Migration.Recipient()})
}

// ImportRequest is the body of POST /api/v1/deployments/import.
type ImportRequest struct {
	Migration string `json:"migration"`
	Preview   bool   `json:"preview"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Transfer confirms the transfer of the domain the preview quoted: the first build
	// then transfers it to this fedhost's registrar with the string's auth code.
	Transfer *ImportTransfer `json:"transfer,omitempty"`
}

// ImportTransfer is the operator's confirmation of an imported domain's transfer: the
// price and currency the preview quoted, and optionally the registrar and the contact
// (the preview's when empty).
type ImportTransfer struct {
	Registrar   string `json:"registrar,omitempty"`
	ContactID   string `json:"contact_id,omitempty"`
	PriceMicros int64  `json:"price_micros"`
	Currency    string `json:"currency"`
}

func (h *handlers) importDeployment(c *fiber.Ctx) error {
	if h.d.Migration == nil {
		return fiber.ErrNotFound
	}
	var req ImportRequest
	if err := json.Unmarshal(c.Body(), &req); err != nil {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Message: "the body is not a JSON object with migration, and optionally preview, name, namespace and transfer"}
	}
	if err := input.Text("name", req.Name, input.MaxName); req.Name != "" && err != nil {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/name", Message: "the name " + err.(*input.Error).Problem}
	}
	if len(req.Namespace) > 63 {
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/namespace", Message: "use 1 to 24 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen"}
	}
	p, err := h.d.Migration.Open(req.Migration, time.Now())
	if err != nil {
		// Open's reasons never quote the string.
		msg := err.Error()
		if errors.Is(err, migration.ErrFormat) && req.Migration == "" {
			msg = "give the migration string the source's export answered, in \"migration\""
		}
		return &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/migration", Message: msg}
	}
	cl, _ := callerOf(c)
	ir := deploy.ImportRequest{Payload: p, Owner: cl.user.ID, Name: req.Name, Namespace: req.Namespace, Preview: req.Preview}
	if t := req.Transfer; t != nil {
		ir.Transfer = &deploy.ImportTransfer{Registrar: t.Registrar, ContactID: t.ContactID, PriceMicros: t.PriceMicros, Currency: t.Currency}
	}
	plan, err := h.d.Engine.Import(c.UserContext(), ir)
	if err != nil {
		return err
	}
	if req.Preview {
		return c.JSON(plan)
	}
	c.Locals("deployment", plan.Deployment)
	c.Locals("build", plan.Build)
	return c.Status(fiber.StatusAccepted).JSON(plan)
}
