package secretfile

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
)

func TestGenerateLengthAndAlphabet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		encoding string
		length   int
		decode   func(string) ([]byte, error)
		pattern  string
		chars    int
	}{
		{"", 8, nil, `^[A-Za-z0-9]+$`, 8},
		{"alphanumeric", 1024, nil, `^[A-Za-z0-9]+$`, 1024},
		{"hex", 16, hex.DecodeString, `^[0-9a-f]+$`, 32},
		{"base64", 20, base64.StdEncoding.DecodeString, `^[A-Za-z0-9+/]+=$`, 28},
		{"base64url", 32, base64.RawURLEncoding.DecodeString, `^[A-Za-z0-9_-]+$`, 43},
	}
	for _, tt := range tests {
		t.Run(tt.encoding, func(t *testing.T) {
			t.Parallel()
			v, err := Generate(contract.Generate{Length: tt.length, Encoding: tt.encoding})
			require.NoError(t, err)
			require.Regexp(t, regexp.MustCompile(tt.pattern), string(v))
			require.Len(t, v, tt.chars)
			if tt.decode != nil {
				raw, err := tt.decode(string(v))
				require.NoError(t, err)
				require.Len(t, raw, tt.length, "length counts random bytes")
			}
			w, err := Generate(contract.Generate{Length: tt.length, Encoding: tt.encoding})
			require.NoError(t, err)
			require.NotEqual(t, v, w)
		})
	}
}

func TestAlphanumericRejectsBiasedBytes(t *testing.T) {
	t.Parallel()
	// Bytes 248 to 255 would favour the first eight characters: they must be skipped.
	random := bytes.NewReader(append(append(bytes.Repeat([]byte{248, 255}, 20), 0, 61, 62, 247), make([]byte, 64)...))
	v, err := Alphanumeric(random, 4)
	require.NoError(t, err)
	require.Equal(t, "A9A9", string(v))

	big, err := Generate(contract.Generate{Length: 62 * 200})
	require.NoError(t, err)
	counts := map[byte]int{}
	for _, c := range big {
		counts[c]++
	}
	require.Len(t, counts, 62, "every character of [A-Za-z0-9] is drawn")
}

func TestParseRef(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{"acme/web/db-password@v3", true},
		{"acme/web/db-password@v0", false},
		{"acme/web/db-password@v03", false},
		{"acme/web/db-password", false},
		{"acme/web/../db@v1", false},
		{"acme/web/sub/db@v1", false},
		{"Acme/web/db@v1", false},
		{"acme/web/db@v1x", false},
		{"/web/db@v1", false},
	}
	for _, tt := range tests {
		r, ok := ParseRef(tt.in)
		require.Equal(t, tt.ok, ok, tt.in)
		if ok {
			require.Equal(t, tt.in, r.String())
		}
	}
}

func TestWant(t *testing.T) {
	t.Parallel()
	gen := File{Name: "pw", Generate: &contract.Generate{Length: 12}}
	sup := File{Name: "api"}
	stored := &Stored{Version: 2, Generator: "alphanumeric:12", Value: []byte("kept-value")}

	v, err := Want(gen, stored, nil)
	require.NoError(t, err)
	require.Nil(t, v, "a generated value is kept")

	v, err = Want(gen, &Stored{Version: 1, Generator: "hex:12", Value: []byte("x")}, nil)
	require.NoError(t, err)
	require.Len(t, v, 12, "a changed generator makes a new value")

	v, err = Want(sup, &Stored{Version: 1, Generator: "supplied", Value: []byte("same")}, map[string][]byte{"api": []byte("same")})
	require.NoError(t, err)
	require.Nil(t, v)

	v, err = Want(sup, &Stored{Version: 1, Generator: "supplied", Value: []byte("old")}, map[string][]byte{"api": []byte("new")})
	require.NoError(t, err)
	require.Equal(t, "new", string(v))

	_, err = Want(sup, nil, map[string][]byte{"other": []byte("x")})
	require.Equal(t, sdk.CodeInvalid, sdk.CodeOf(err))
	require.Equal(t, "request/files/api", sdk.FieldOf(err))
}
