package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/url"
	"sort"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
	"github.com/fedhost/fedhost/ui/form"
)

type configureData struct {
	D         store.Deployment
	Fields    template.HTML
	Plan      *deploy.Plan
	NoCatalog bool
	// Update names the newer catalog revision a deploy may apply, "" when there is none.
	Update string
	// Unrunnable lists the apps of the catalog this host cannot run, enabled ones first.
	Unrunnable []unrunnableApp
}

type unrunnableApp struct {
	Name, Why string
	Enabled   bool
}

func (u *UI) configurePage(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.read")
	if err != nil {
		return err
	}
	return u.showConfigure(c, s, d, fiber.StatusOK, configureState{value: u.withSuggestedDomain(d, json.RawMessage(d.Config))})
}

// withSuggestedDomain fills in the suggested domain of d, whose namespace stands for
// {namespace} in it, when its configuration names none yet.
func (u *UI) withSuggestedDomain(d store.Deployment, value json.RawMessage) json.RawMessage {
	if u.d.SuggestedDomain == "" || d.Domain != "" {
		return value
	}
	doc := map[string]any{}
	if len(value) > 0 && json.Unmarshal(value, &doc) != nil {
		return value
	}
	if domain, _ := doc["domain"].(string); domain != "" {
		return value
	}
	doc["domain"] = suggestedDomain(u.d.SuggestedDomain, d.Namespace)
	out, err := json.Marshal(doc)
	if err != nil {
		return value
	}
	return out
}

// suggestedDomain is the suggestion for namespace.
func suggestedDomain(pattern, namespace string) string {
	return strings.ReplaceAll(pattern, "{namespace}", namespace)
}

// configureState is what the configuration page shows beside the deployment.
type configureState struct {
	value   json.RawMessage
	errs    map[string]string
	plan    *deploy.Plan
	message string
}

func (u *UI) showConfigure(c *fiber.Ctx, s *session, d store.Deployment, status int, st configureState) error {
	data := configureData{D: d, Plan: st.plan}
	if _, to, ok := u.d.Engine.UpdateAvailable(d); ok {
		data.Update = to
	}
	if cat := u.d.Engine.Catalog(); cat == nil {
		data.NoCatalog = true
	} else {
		fields, err := form.Render(cat.Schema(), st.value, form.Options{Errors: st.errs, SecretsSet: secretsSet(d)})
		if err != nil {
			return err
		}
		data.Fields = fields
		data.Unrunnable = unrunnable(u.d.Engine.Unrunnable(s.ctx), st.value)
	}
	v := u.view(s, "Configure "+d.Name, "deployments", data)
	v.Error = st.message
	return u.render(c, status, "configure", v)
}

// unrunnable lists the verdicts of the engine, the apps value enables first.
func unrunnable(verdicts map[string]string, value json.RawMessage) []unrunnableApp {
	cfg, _ := catalog.ParseConfig(value)
	out := make([]unrunnableApp, 0, len(verdicts))
	for name, why := range verdicts {
		out = append(out, unrunnableApp{Name: name, Why: why, Enabled: cfg.Apps[name].Enable})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Enabled != out[j].Enabled {
			return out[i].Enabled
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// secretsSet is the writeOnly values the deployment has stored: the keys of its secret refs.
func secretsSet(d store.Deployment) map[string]bool {
	refs := map[string]string{}
	_ = json.Unmarshal([]byte(d.SecretRefs), &refs)
	out := make(map[string]bool, len(refs))
	for ptr := range refs {
		out[ptr] = true
	}
	return out
}

func (u *UI) configure(c *fiber.Ctx, s *session) error {
	d, err := u.ownDeployment(s, c.Params("id"), "deployment.submit")
	if err != nil {
		return err
	}
	cat := u.d.Engine.Catalog()
	if cat == nil {
		return u.showConfigure(c, s, d, fiber.StatusServiceUnavailable, configureState{})
	}
	raw, err := form.Decode(cat.Schema(), formValues(c))
	var fe *form.Error
	if errors.As(err, &fe) {
		// What did parse is shown as it was sent; the marked fields need correcting.
		return u.showConfigure(c, s, d, fiber.StatusBadRequest, configureState{value: raw, errs: fe.Fields,
			message: "Some values could not be read; they are marked below. Correct them and send again."})
	}
	if err != nil {
		return err
	}
	switch c.FormValue("action") {
	case "preview":
		plan, err := u.d.Engine.Preview(s.ctx, d.ID, raw)
		if st, ok := refused(err, raw); ok {
			return u.showConfigure(c, s, d, statusOf(err), st)
		}
		if err != nil {
			return err
		}
		return u.showConfigure(c, s, d, fiber.StatusOK, configureState{value: raw, plan: &plan})
	case "deploy":
		b, _, err := u.d.Engine.SubmitWith(s.ctx, d.ID, raw, deploy.SubmitOptions{ApplyUpdates: c.FormValue("apply_updates") == "on",
			ClearSecrets: postValues(c, form.ClearSecretField)})
		result, reason := resultOf(err)
		if rerr := u.record(s.ctx, audit.Event{Action: "deployment.submit", DeploymentID: d.ID, BuildID: b.ID, Result: result, Reason: reason}); rerr != nil {
			return errors.Join(err, rerr)
		}
		if st, ok := refused(err, raw); ok {
			return u.showConfigure(c, s, d, statusOf(err), st)
		}
		if err != nil {
			return err
		}
		return c.Redirect("/builds/"+b.ID, fiber.StatusSeeOther)
	}
	return u.showConfigure(c, s, d, fiber.StatusBadRequest, configureState{value: raw,
		message: "Choose Preview to see what would change, or Deploy to apply the configuration."})
}

// refused turns an engine refusal into the page that shows it: an invalid value next to
// its field, anything else (a build still running, a full queue) above the form.
func refused(err error, raw json.RawMessage) (configureState, bool) {
	var de *deploy.Error
	if !errors.As(err, &de) {
		return configureState{}, false
	}
	st := configureState{value: raw, message: de.Message}
	if de.Code != deploy.CodeInvalidConfiguration {
		return st, true
	}
	st.errs = map[string]string{}
	for _, p := range de.Details {
		if _, ok := st.errs[p.Location]; !ok {
			st.errs[p.Location] = p.Message
		}
	}
	if len(st.errs) == 0 && de.Location != "" {
		st.errs[de.Location] = de.Message
	}
	switch n := len(st.errs); {
	case n == 1:
		st.message = "The configuration was not accepted: see the marked field."
	case n > 1:
		st.message = fmt.Sprintf("The configuration was not accepted: %d fields are marked below.", n)
	}
	return st, true
}

// statusOf is the HTTP status of an engine refusal, as the API answers it.
func statusOf(err error) int {
	var de *deploy.Error
	if errors.As(err, &de) && de.Code == deploy.CodeInvalidConfiguration {
		return fiber.StatusBadRequest
	}
	return fiber.StatusConflict
}

// postValues is every value of one name in the urlencoded body.
func postValues(c *fiber.Ctx, name string) []string {
	var out []string
	for _, v := range c.Request().PostArgs().PeekMulti(name) {
		out = append(out, string(v))
	}
	return out
}

// formValues is the urlencoded body of the request, as form.Decode reads it.
func formValues(c *fiber.Ctx) url.Values {
	v := url.Values{}
	c.Request().PostArgs().VisitAll(func(key, value []byte) {
		v.Add(string(key), string(value))
	})
	return v
}
