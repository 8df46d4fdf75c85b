package ui

import (
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/migration"
	"github.com/fedhost/fedhost/host/store"
)

// importBody bounds an import's form: a whole migration string and room for the rest.
const importBody = migration.MaxLen + 4<<10

type importData struct {
	// Name and Namespace are what the operator typed; Field is the input a refusal
	// was about.
	Name, Namespace, Field string
	// Plan is the preview's answer, and Migration the string once more, in a hidden
	// field of the preview only.
	Plan      *deploy.ImportPlan
	Migration string
	// Contacts are the operator's, to choose the holder of a domain the import can
	// transfer, when they have more than one.
	Contacts []store.Contact
}

// importPage asks for a migration string, and optionally a name and a namespace.
func (u *UI) importPage(c *fiber.Ctx, s *session) error {
	if u.d.Migration == nil {
		return fiber.ErrNotFound
	}
	return u.render(c, fiber.StatusOK, "import", u.view(s, "Import a deployment", "deployments", importData{}))
}

// importDeployment previews an import ("preview" set) or makes it, then shows the new
// deployment's first build. A refused string's page never holds the string.
func (u *UI) importDeployment(c *fiber.Ctx, s *session) error {
	const action = "deployment.import"
	if u.d.Migration == nil {
		return fiber.ErrNotFound
	}
	data := importData{Name: c.FormValue("name"), Namespace: c.FormValue("namespace")}
	preview := c.FormValue("preview") != ""
	str := c.FormValue("migration")
	var plan deploy.ImportPlan
	p, err := u.d.Migration.Open(str, time.Now())
	if err != nil {
		// Open's reasons never quote the string.
		msg := err.Error()
		if errors.Is(err, migration.ErrFormat) && str == "" {
			msg = "paste the migration string the source's export showed"
		}
		err = &deploy.Error{Code: deploy.CodeInvalidConfiguration, Location: "/migration", Message: msg}
	} else {
		plan, err = u.d.Engine.Import(s.ctx, deploy.ImportRequest{Payload: p, Owner: s.ID, Name: data.Name, Namespace: data.Namespace, Preview: preview,
			Transfer: importTransfer(c)})
	}
	if !preview {
		result, reason := resultOf(err)
		if rerr := u.record(s.ctx, audit.Event{Action: action, DeploymentID: plan.Deployment, BuildID: plan.Build, Result: result, Reason: reason}); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	var de *deploy.Error
	if errors.As(err, &de) {
		data.Field = de.Location
		v := u.view(s, "Import a deployment", "deployments", data)
		v.Error = de.Message
		status := fiber.StatusBadRequest
		if de.Code == deploy.CodeConflict {
			status = fiber.StatusConflict
		}
		return u.render(c, status, "import", v)
	}
	if err != nil {
		return err
	}
	if preview {
		// The preview's answer holds the string once more, in the hidden field the
		// Import button posts: acceptable only because this answer is never cached.
		data.Plan, data.Migration = &plan, str
		if plan.Domain.Action == "transfer" && plan.Domain.QuoteError == "" {
			cs, err := u.d.Store.Contacts(s.ctx, s.ID)
			if err != nil {
				return err
			}
			if len(cs) > 1 {
				data.Contacts = cs
			}
		}
		c.Set(fiber.HeaderCacheControl, "no-store")
		return u.render(c, fiber.StatusOK, "import", u.view(s, "Import "+plan.Name, "deployments", data))
	}
	return c.Redirect("/builds/"+plan.Build, fiber.StatusSeeOther)
}

// importTransfer is the confirmation of the domain's transfer the preview's form posts
// when its box is ticked (the quote in its hidden fields, the contact chosen), else nil.
func importTransfer(c *fiber.Ctx) *deploy.ImportTransfer {
	if c.FormValue("transfer") == "" {
		return nil
	}
	// A price that is not a number is 0, which the engine refuses naming the field.
	price, _ := strconv.ParseInt(c.FormValue("transfer_price_micros"), 10, 64)
	return &deploy.ImportTransfer{Registrar: c.FormValue("transfer_registrar"), ContactID: c.FormValue("transfer_contact"),
		PriceMicros: price, Currency: c.FormValue("transfer_currency")}
}
