package schema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
)

func TestErrorsNameTheFieldAndNeverTheValue(t *testing.T) {
	t.Parallel()
	s, err := Compile("t.json", []byte(`{"type":"object","properties":{
		"token":{"type":"string","pattern":"^[a-f0-9]+$","minLength":4,"maxLength":8},
		"mail":{"type":"string","format":"email"},
		"size":{"type":"integer","minimum":10,"maximum":20,"multipleOf":5},
		"nested":{"type":"object","properties":{"list":{"type":"array","items":{"type":"integer"}}}}}}`))
	require.NoError(t, err)
	cases := []struct{ doc, field, message string }{
		{`{"token":"s3cr3tXY"}`, "config/token", "pattern"},
		{`{"token":"abcdef0123"}`, "config/token", "at most 8 characters"},
		{`{"mail":"s3cr3t-VALUE"}`, "config/mail", "must be an e-mail address"},
		{`{"size":93457}`, "config/size", "at most 20"},
		{`{"size":15.5}`, "config/size", ""},
		{`{"nested":{"list":[1,"s3cr3t-VALUE"]}}`, "config/nested/list/1", "must be a whole number"},
	}
	for _, c := range cases {
		err := Validate(s, "config", []byte(c.doc))
		require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err), c.doc)
		require.Equal(t, c.field, sdk.FieldOf(err), c.doc)
		require.Contains(t, err.Error(), c.message, c.doc)
		require.NotContains(t, err.Error(), "s3cr3t")
		require.NotContains(t, err.Error(), "93457")
		require.NotContains(t, err.Error(), "abcdef0123")
	}
}

const siteSchema = `{"type":"object","additionalProperties":false,"required":["site","admin"],"properties":{
	"site":{"type":"string","title":"Site name","minLength":3},
	"admin":{"type":"object","title":"Administrator","required":["email","someKey"],"properties":{
		"email":{"type":"string","title":"Admin e-mail","format":"email"},
		"someKey":{"type":"string"}}},
	"mirrors":{"type":"array","title":"Mirrors","maxItems":2,"items":{"$ref":"#/$defs/mirror"}},
	"mode":{"enum":["fast","safe"],"title":"Mode"}},
	"$defs":{"mirror":{"type":"object","title":"Mirror","required":["url"],"properties":{"url":{"type":"string","format":"uri"}}}}}`

func TestCheckListsEveryProblemAtItsField(t *testing.T) {
	t.Parallel()
	s, err := Compile("site.json", []byte(siteSchema))
	require.NoError(t, err)
	got := Check(s, []byte(`{"site":"s3","admin":{"email":"s3cr3t-VALUE"},
		"mirrors":[{"url":"https://a.example/"},{},{"url":"x"}],"mode":"s3cr3t","extra":1}`))
	require.Equal(t, []Problem{
		{"/admin/email", "Admin e-mail must be an e-mail address"},
		{"/admin/someKey", "Some key is required: fill it in"},
		{"/extra", "This is not a known option here: remove it"},
		{"/mirrors", "Mirrors takes at most 2 items"},
		{"/mirrors/1/url", "Url is required: fill it in"},
		{"/mirrors/2/url", "Url must be a URL such as https://example.org/"},
		{"/mode", "Mode must be one of the choices: fast, safe"},
		{"/site", "Site name must be at least 3 characters"},
	}, got)
	for _, p := range got {
		require.NotContains(t, p.Message, "s3cr3t")
	}
	require.Empty(t, Check(s, []byte(`{"site":"abc","admin":{"email":"a@example.org","someKey":"k"}}`)))
	require.Equal(t, []Problem{{"/admin", "Administrator is required: fill it in"}, {"/site", "Site name is required: fill it in"}},
		Check(s, []byte(`{}`)))
}

func TestApplyDefaultsAtEveryDepth(t *testing.T) {
	t.Parallel()
	s, err := Compile("d.json", []byte(`{"type":"object","properties":{
		"name":{"type":"string","default":"Reader"},
		"kept":{"type":"string","default":"no"},
		"tls":{"type":"object","default":{},"properties":{"port":{"type":"integer","default":443},"on":{"type":"boolean","default":true}}},
		"absent":{"type":"object","properties":{"x":{"type":"integer","default":1}}},
		"hooks":{"type":"array","items":{"$ref":"#/$defs/hook"}}},
		"$defs":{"hook":{"type":"object","properties":{"method":{"type":"string","default":"POST"}}}}}`))
	require.NoError(t, err)
	doc := map[string]any{"kept": "yes", "hooks": []any{map[string]any{}, map[string]any{"method": "GET"}}}
	ApplyDefaults(s, doc)
	require.Equal(t, map[string]any{
		"name": "Reader", "kept": "yes",
		"tls":   map[string]any{"port": json.Number("443"), "on": true},
		"hooks": []any{map[string]any{"method": "POST"}, map[string]any{"method": "GET"}},
	}, normalize(t, doc))
	// The schema's own default stays as it was.
	again := map[string]any{}
	ApplyDefaults(s, again)
	require.Equal(t, map[string]any{"port": json.Number("443"), "on": true}, normalize(t, again)["tls"])
}

func normalize(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out map[string]any
	require.NoError(t, d.Decode(&out))
	return out
}

// A name propertyNames refuses is reported at its entry, saying what the name must be.
func TestPropertyNamesProblemSitsAtTheEntry(t *testing.T) {
	s, err := Compile("pn.json", []byte(`{"type":"object","properties":{"labels":{"type":"object",
		"propertyNames":{"maxLength":5}}}}`))
	require.NoError(t, err)
	require.Equal(t, []Problem{{Location: "/labels/toolong", Message: "The name of this entry must be at most 5 characters: rename it"}},
		Check(s, []byte(`{"labels":{"ok":1,"toolong":2}}`)))
}
