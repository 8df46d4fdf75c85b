package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/schema"
)

func hostNameCatalog(t *testing.T) *Catalog {
	t.Helper()
	withHostName := func(def string) json.RawMessage {
		return json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{
			"hostName":{"type":"string","title":"Host name","default":"` + def + `","x-hostname":true},
			"title":{"type":"string","default":"x"}}}`)
	}
	apps := []*App{
		{Name: "miniflux", Version: "1.0.0", Summary: "Miniflux", Schema: withHostName("feeds")},
		{Name: "peertube", Version: "1.0.0", Summary: "PeerTube", Schema: withHostName("video")},
		// A host name nested in an object is found too.
		{Name: "pixelfed", Version: "1.0.0", Summary: "Pixelfed", Schema: json.RawMessage(`{"type":"object","properties":{
			"web":{"type":"object","default":{},"properties":{"name":{"type":"string","title":"Web name","default":"photos","x-hostname":true}}}}}`)},
		{Name: "worker", Version: "1.0.0", Summary: "Worker", Schema: json.RawMessage(`{"type":"object","properties":{"hostName":{"type":"string","default":"feeds"}}}`)},
	}
	c := &Catalog{byName: map[string]*App{}, versions: map[string]map[string]*App{}}
	for _, a := range apps {
		c.apps = append(c.apps, a)
		c.byName[a.Name] = a
		c.versions[a.Name] = map[string]*App{a.Version: a}
	}
	require.NoError(t, c.compose())
	return c
}

func filledHostNames(t *testing.T, c *Catalog, config string) (map[string]string, []schema.Problem) {
	t.Helper()
	filled, err := c.WithDefaults(json.RawMessage(config))
	require.NoError(t, err)
	return c.HostNames(filled)
}

// The defaults give each app its own name; an app whose schema marks no option (worker,
// whose hostName is an ordinary option) has no host name and takes none, and a disabled
// app takes none either.
func TestHostNamesFromDefaults(t *testing.T) {
	t.Parallel()
	c := hostNameCatalog(t)
	hosts, problems := filledHostNames(t, c, `{"domain":"acme.example.org","apps":{
		"miniflux":{"enable":true},"pixelfed":{"enable":true},"worker":{"enable":true},"peertube":{"enable":false}}}`)
	require.Empty(t, problems)
	require.Equal(t, map[string]string{"miniflux": "feeds.acme.example.org", "pixelfed": "photos.acme.example.org"}, hosts)

	hosts, problems = filledHostNames(t, c, `{"domain":"acme.example.org","apps":{
		"miniflux":{"enable":true,"options":{"hostName":"news.eu"}},"peertube":{"enable":false,"options":{"hostName":"news.eu"}}}}`)
	require.Empty(t, problems, "a disabled app does not take its name")
	require.Equal(t, map[string]string{"miniflux": "news.eu.acme.example.org"}, hosts)
}

// Two enabled apps of one name: a problem at each app's option, neither gets the name.
func TestHostNamesRefuseTwoAppsOfOneName(t *testing.T) {
	t.Parallel()
	c := hostNameCatalog(t)
	hosts, problems := filledHostNames(t, c, `{"domain":"acme.example.org","apps":{
		"miniflux":{"enable":true},"peertube":{"enable":true,"options":{"hostName":"feeds"}},"pixelfed":{"enable":true}}}`)
	msg := "Host name feeds is taken by another app of this deployment: choose another"
	require.Equal(t, []schema.Problem{
		{Location: "/apps/miniflux/options/hostName", Message: msg},
		{Location: "/apps/peertube/options/hostName", Message: msg},
	}, problems)
	require.Equal(t, map[string]string{"pixelfed": "photos.acme.example.org"}, hosts)
}

func TestHostNamesRefuseABadName(t *testing.T) {
	t.Parallel()
	c := hostNameCatalog(t)
	bad := "The name must be a name under the deployment's domain: labels of 1 to 63 lower case letters, digits and inner hyphens, joined by dots, such as feeds"
	long := make([]byte, 0, 250)
	for len(long) < 240 {
		long = append(long, "abcdefghi."...)
	}
	long = append(long, 'z')
	for _, tc := range []struct{ name, value, message string }{
		{"upper case", "Feeds", bad},
		{"a leading hyphen", "-feeds", bad},
		{"an empty label", "feeds..eu", bad},
		{"a trailing dot", "feeds.", bad},
		{"a label of 64", "a123456789012345678901234567890123456789012345678901234567890123", bad},
		{"an underscore", "my_feeds", bad},
		{"too long with the domain", string(long), "The name with the domain is longer than 253 characters: choose a shorter one"},
		{"reserved", "auth", "The name is the name of the deployment's own sign-in (https://auth.<domain>/): choose another"},
	} {
		hosts, problems := filledHostNames(t, c, `{"domain":"acme.example.org","apps":{
			"miniflux":{"enable":true,"options":{"hostName":"`+tc.value+`"}},"pixelfed":{"enable":true,"options":{"web":{"name":"`+tc.value+`"}}}}}`)
		require.Equal(t, []schema.Problem{
			{Location: "/apps/miniflux/options/hostName", Message: "Host name" + tc.message[len("The name"):]},
			{Location: "/apps/pixelfed/options/web/name", Message: "Web name" + tc.message[len("The name"):]},
		}, problems, tc.name)
		require.Empty(t, hosts, tc.name)
	}
}

// An app's schema may mark one string option, no more.
func TestComposeRefusesAWrongHostNameMark(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"port":{"type":"integer","x-hostname":true}}}`, "option /port is marked x-hostname but is not of type string"},
		{`{"type":"object","properties":{"a":{"type":"string","x-hostname":true},"b":{"type":"string","x-hostname":true}}}`, "options /a and /b are both marked x-hostname"},
		{`{"type":"object","properties":{"a":{"type":"string","x-hostname":"yes"}}}`, "option /a: x-hostname must be true or false"},
	} {
		a := &App{Name: "site", Version: "1.0.0", Summary: "Site", Schema: json.RawMessage(tc.schema)}
		c := &Catalog{apps: []*App{a}, byName: map[string]*App{"site": a}}
		require.ErrorContains(t, c.compose(), tc.want)
	}
}
