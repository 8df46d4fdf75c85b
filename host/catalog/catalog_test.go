package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/schema"
	"github.com/fedhost/fedhost/ui/form"
)

// A deployment pinned to an older revision is validated against the schemas of the
// versions it runs, not the newest.
func TestAtValidatesWithTheVersionsOfARevision(t *testing.T) {
	t.Parallel()
	old := &App{Name: "miniflux", Version: "2.3.5", Summary: "Miniflux 2.3.5",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"pollingFrequency":{"type":"integer"}}}`)}
	newer := &App{Name: "miniflux", Version: "2.4.0", Summary: "Miniflux 2.4.0",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"pollingFrequency":{"type":"integer"},"webhooks":{"type":"boolean"}}}`)}
	other := &App{Name: "peertube", Version: "7.0.0", Summary: "PeerTube",
		Schema: json.RawMessage(`{"type":"object"}`)}
	c := &Catalog{apps: []*App{newer, other}, byName: map[string]*App{"miniflux": newer, "peertube": other},
		versions: map[string]map[string]*App{"miniflux": {"2.3.5": old, "2.4.0": newer}, "peertube": {"7.0.0": other}}}
	require.NoError(t, c.compose())

	withWebhooks := json.RawMessage(`{"domain":"x.org","apps":{"miniflux":{"enable":true,"options":{"webhooks":true}}}}`)
	require.NoError(t, c.Validate(withWebhooks), "the newest version knows the option")

	pinned, err := c.At(map[string]string{"miniflux": "2.3.5"})
	require.NoError(t, err)
	err = pinned.Validate(withWebhooks)
	require.Error(t, err, "2.3.5 does not know it")
	require.Contains(t, err.Error(), "webhooks")
	require.NoError(t, pinned.Validate(json.RawMessage(`{"domain":"x.org","apps":{"peertube":{"enable":true}}}`)),
		"an app the revision does not name is at its newest")
	a, ok := pinned.App("miniflux")
	require.True(t, ok)
	require.Equal(t, "2.3.5", a.Version)

	again, err := c.At(map[string]string{"miniflux": "2.3.5"})
	require.NoError(t, err)
	require.Same(t, pinned, again, "views are made once")

	_, err = c.At(map[string]string{"miniflux": "2.2.0"})
	require.ErrorContains(t, err, "install fedhost-app-miniflux_2.2.0, or apply updates")
}

func testCatalog(t *testing.T, schema string) *Catalog {
	t.Helper()
	a := &App{Name: "site", Version: "1.0.0", Summary: "Site", Schema: json.RawMessage(schema)}
	c := &Catalog{apps: []*App{a}, byName: map[string]*App{"site": a}, versions: map[string]map[string]*App{"site": {"1.0.0": a}}}
	require.NoError(t, c.compose())
	return c
}

const siteSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,
	"required":["title","smtp"],"properties":{
	"title":{"type":"string","title":"Site name","minLength":3,"default":"My site"},
	"smtp":{"type":"object","title":"Mail","required":["host","port"],"default":{},"properties":{
		"port":{"type":"integer","title":"Port","default":587},
		"host":{"type":"string","title":"Mail server","default":"localhost"}}},
	"admins":{"type":"array","title":"Admins","items":{"type":"object","required":["email"],"properties":{
		"email":{"type":"string","title":"Admin e-mail","format":"email"},
		"role":{"enum":["owner","editor"],"default":"editor"}}}}}}`

// An enabled app submitted without options is stored with its schema's defaults, at every
// depth; a disabled app gets no options.
func TestWithDefaultsFillsEveryDepth(t *testing.T) {
	t.Parallel()
	c := testCatalog(t, siteSchema)
	got, err := c.WithDefaults(json.RawMessage(`{"domain":"x.org","apps":{"site":{"enable":true,"options":{"admins":[{"email":"a@x.org"}]}}}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"domain":"x.org","apps":{"site":{"enable":true,"deleteData":false,"options":{
		"title":"My site","smtp":{"port":587,"host":"localhost"},"admins":[{"email":"a@x.org","role":"editor"}]}}}}`, string(got))
	require.Empty(t, c.Check(got))

	got, err = c.WithDefaults(json.RawMessage(`{"domain":"x.org","apps":{"site":{"enable":true}}}`))
	require.NoError(t, err)
	require.Empty(t, c.Check(got), "an untouched app is valid with its defaults")

	got, err = c.WithDefaults(json.RawMessage(`{"domain":"x.org","apps":{"site":{"enable":false}}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"domain":"x.org","apps":{"site":{"enable":false,"deleteData":false}}}`, string(got))
}

func TestCheckReportsEveryProblemAtItsField(t *testing.T) {
	t.Parallel()
	c := testCatalog(t, siteSchema)
	problems := c.Check(json.RawMessage(`{"domain":"x.org","apps":{"site":{"enable":true,"options":{
		"title":"ab","smtp":{"port":"x","host":"h"},"admins":[{"role":"owner"}]}}}}`))
	require.Equal(t, []schema.Problem{
		{Location: "/apps/site/options/admins/0/email", Message: "Admin e-mail is required: fill it in"},
		{Location: "/apps/site/options/smtp/port", Message: "Port must be a whole number"},
		{Location: "/apps/site/options/title", Message: "Site name must be at least 3 characters"},
	}, problems)
}

// The composed schema keeps an app's properties in the order the app wrote them.
func TestComposeKeepsTheAppsPropertyOrder(t *testing.T) {
	t.Parallel()
	c := testCatalog(t, siteSchema)
	s := string(c.Schema())
	require.Less(t, strings.Index(s, `"title":{"type":"string","title":"Site name"`), strings.Index(s, `"smtp":`))
	require.Less(t, strings.Index(s, `"port":`), strings.Index(s, `"host":{"type":"string","title":"Mail server"`))
	require.Contains(t, s, `"$defs":{"site":{"$id":"app-site.json","type":"object","additionalProperties":false,`,
		"the app's schema is a resource of its own, without its $schema")
}

// An app's own $defs keep working inside the composed schema: its "#/$defs/x" means its
// own definitions, in validation, defaults and the form.
func TestAppSchemaWithItsOwnDefs(t *testing.T) {
	t.Parallel()
	c := testCatalog(t, `{"type":"object","properties":{"mirrors":{"type":"array","items":{"$ref":"#/$defs/mirror"}}},
		"$defs":{"mirror":{"type":"object","title":"Mirror","required":["url"],"properties":{"url":{"type":"string","title":"Mirror URL"},"weight":{"type":"number","default":0.5}}}}}`)
	filled, err := c.WithDefaults(json.RawMessage(`{"domain":"x.org","apps":{"site":{"enable":true,"options":{"mirrors":[{"url":"https://a"},{}]}}}}`))
	require.NoError(t, err)
	require.Contains(t, string(filled), `{"url":"https://a","weight":0.5}`)
	require.Equal(t, []schema.Problem{{Location: "/apps/site/options/mirrors/1/url", Message: "Mirror URL is required: fill it in"}}, c.Check(filled))
	_, err = form.Render(c.Schema(), filled, form.Options{})
	require.NoError(t, err, "the form of the composed schema")
	empty := testCatalog(t, `{}`)
	require.Empty(t, empty.Check(json.RawMessage(`{"domain":"x.org","apps":{"site":{"enable":true}}}`)))
}

// A deployment's domain is a name one can hold: not an IP, not over 253 characters, not
// a public suffix alone, each refused at /domain without the value in the message.
func TestCheckRefusesDomainsNobodyHolds(t *testing.T) {
	t.Parallel()
	c := testCatalog(t, siteSchema)
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 60) + ".example.org"
	for _, domain := range []string{"co.uk", "github.io", "192.0.2.1", "not a domain", "Acme.Example", long, "acme"} {
		problems := c.Check(json.RawMessage(`{"domain":"` + domain + `","apps":{}}`))
		require.Len(t, problems, 1, domain)
		require.Equal(t, "/domain", problems[0].Location, domain)
		require.NotContains(t, problems[0].Message, domain, "the value is not echoed")
	}
	for _, domain := range []string{"acme.co.uk", "acme.test", "acme.localhost", "feeds.acme.example.org"} {
		require.Empty(t, c.Check(json.RawMessage(`{"domain":"`+domain+`","apps":{}}`)), domain)
	}
}
