package schema

import (
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
		{`{"mail":"s3cr3t-VALUE"}`, "config/mail", "valid email"},
		{`{"size":93457}`, "config/size", "at most 20"},
		{`{"size":15.5}`, "config/size", ""},
		{`{"nested":{"list":[1,"s3cr3t-VALUE"]}}`, "config/nested/list/1", "must be of type integer"},
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
