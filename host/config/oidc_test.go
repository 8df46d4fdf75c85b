package config_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/config"
)

const oidcSecret = "Sup3r-S3cret-0f-th3-Client"

// secretFile writes the client secret, with the newline an editor leaves, and returns its path.
func secretFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "oidc-secret")
	require.NoError(t, os.WriteFile(path, []byte(oidcSecret+"\n"), 0o600))
	return path
}

func TestOperatorOIDC(t *testing.T) {
	t.Parallel()
	secret := secretFile(t)

	t.Run("none by default", func(t *testing.T) {
		t.Parallel()
		got, err := config.Load(writeFile(t, ""), nil, nil)
		require.NoError(t, err)
		require.Nil(t, got.OperatorOIDC)
	})

	t.Run("every attribute", func(t *testing.T) {
		t.Parallel()
		got, err := config.Load(writeFile(t, `
operator_oidc {
  issuer             = "https://id.example.org/realms/ops"
  client_id          = "fedhost"
  client_secret_file = "`+secret+`"
  redirect_url       = "https://fedhost.example.org/login/oidc/callback"
  username_claim     = "email"
  superuser_group    = "fedhost-admins"
  create_users       = true
  button_label       = "Log in with Example ID"
}
`), nil, nil)
		require.NoError(t, err)
		require.Equal(t, &config.OperatorOIDC{
			Issuer: "https://id.example.org/realms/ops", ClientID: "fedhost", ClientSecretFile: secret,
			RedirectURL: "https://fedhost.example.org/login/oidc/callback", UsernameClaim: "email",
			SuperuserGroup: "fedhost-admins", CreateUsers: true, ButtonLabel: "Log in with Example ID",
		}, got.OperatorOIDC)
		s, err := got.OperatorOIDC.ClientSecret()
		require.NoError(t, err)
		require.Equal(t, oidcSecret, s, "without the trailing newline")
	})

	t.Run("defaults, and http on the loopback host", func(t *testing.T) {
		t.Parallel()
		got, err := config.Load(writeFile(t, `
operator_oidc {
  issuer             = "http://127.0.0.1:5556/dex"
  client_id          = "fedhost"
  client_secret_file = "`+secret+`"
  redirect_url       = "http://localhost:8080/login/oidc/callback"
}
`), nil, nil)
		require.NoError(t, err)
		o := got.OperatorOIDC
		require.Equal(t, "preferred_username", o.UsernameClaim)
		require.Equal(t, "Log in with single sign-on", o.ButtonLabel)
		require.Empty(t, o.SuperuserGroup)
		require.False(t, o.CreateUsers)
	})
}

func TestOperatorOIDCErrors(t *testing.T) {
	t.Parallel()
	secret := secretFile(t)
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	missing := filepath.Join(t.TempDir(), "missing")

	block := func(attrs ...string) string {
		return "operator_oidc {\n  " + strings.Join(attrs, "\n  ") + "\n}\n"
	}
	const (
		issuer   = `issuer = "https://id.example.org"`
		clientID = `client_id = "fedhost"`
		redirect = `redirect_url = "https://fedhost.example.org/login/oidc/callback"`
	)
	secretAttr := `client_secret_file = "` + secret + `"`

	tests := []struct {
		name string
		src  string
		// want are the lines of the error; {file} is the config file.
		want []string
	}{
		{
			name: "missing issuer",
			src:  block(clientID, secretAttr, redirect),
			want: []string{`{file}:1,15-15: Missing required argument; The argument "issuer" is required, but no definition was found.`},
		},
		{
			name: "the secret itself in the file",
			src:  block(issuer, clientID, `client_secret = "`+oidcSecret+`"`, redirect),
			want: []string{
				`{file}:1,15-15: Missing required argument; The argument "client_secret_file" is required, but no definition was found.`,
				`{file}:4,3-16: Unsupported argument; An argument named "client_secret" is not expected here.`,
			},
		},
		{
			name: "two blocks",
			src:  block(issuer, clientID, secretAttr, redirect) + block(issuer, clientID, secretAttr, redirect),
			want: []string{`{file}:7,1-14: Duplicate operator_oidc block; An operator_oidc block is already declared at {file}:1,1-14; keep only one.`},
		},
		{
			name: "create_users not a bool",
			src:  block(issuer, clientID, secretAttr, redirect, `create_users = "sometimes"`),
			want: []string{`{file}:6,19-28: Unsuitable value type; Unsuitable value for create_users: a bool is required`},
		},
		{
			name: "http issuer",
			src:  block(`issuer = "http://id.example.org"`, clientID, secretAttr, redirect),
			want: []string{`operator_oidc.issuer ({file}:2,3-35): is not an https URL; give the address of the OpenID provider, such as https://id.example.org (http only on 127.0.0.1 or localhost)`},
		},
		{
			name: "redirect elsewhere",
			src:  block(issuer, clientID, secretAttr, `redirect_url = "https://fedhost.example.org/callback"`),
			want: []string{`operator_oidc.redirect_url ({file}:5,3-56): does not end in /login/oidc/callback, where fedhost answers the OpenID provider; give e.g. https://fedhost.example.org/login/oidc/callback`},
		},
		{
			name: "password in the issuer",
			src:  block(`issuer = "ftp://user:`+oidcSecret+`@id.example.org"`, clientID, secretAttr, redirect),
			want: []string{`operator_oidc.issuer ({file}:2,3-66): is not an https URL; give the address of the OpenID provider, such as https://id.example.org (http only on 127.0.0.1 or localhost)`},
		},
		{
			name: "secret file missing",
			src:  block(issuer, clientID, `client_secret_file = "`+missing+`"`, redirect),
			want: []string{`operator_oidc.client_secret_file ({file}:4,3-{end}): open ` + missing + `: no such file or directory; put the client secret in that file, readable by the user fedhost runs as`},
		},
		{
			name: "secret file empty",
			src:  block(issuer, clientID, `client_secret_file = "`+empty+`"`, redirect),
			want: []string{`operator_oidc.client_secret_file ({file}:4,3-{end}): ` + empty + ` is empty; write the client secret the OpenID provider gave fedhost into it`},
		},
		{
			name: "empty client_id and label",
			src:  block(issuer, `client_id = ""`, secretAttr, redirect, `button_label = ""`),
			want: []string{
				`operator_oidc.client_id ({file}:3,3-17): is empty; give the client ID the OpenID provider registered for fedhost`,
				`operator_oidc.button_label ({file}:6,3-20): is empty; give the text of the log-in button, or leave it out for "Log in with single sign-on"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tt.src)
			_, err := config.Load(path, nil, nil)
			require.Error(t, err)
			require.NotContains(t, err.Error(), oidcSecret)
			var want []string
			for _, line := range tt.want {
				line = strings.ReplaceAll(line, "{file}", path)
				// The secret file's attribute ends where its temporary path does.
				line = strings.ReplaceAll(line, "{end}", endColumn(tt.src, "client_secret_file"))
				want = append(want, line)
			}
			require.Equal(t, strings.Join(want, "\n"), err.Error())
		})
	}
}

// endColumn is the column after the line of src that holds attr, as hcl counts it.
func endColumn(src, attr string) string {
	for _, line := range strings.Split(src, "\n") {
		if strings.Contains(line, attr) {
			return strconv.Itoa(len(line) + 1)
		}
	}
	return "?"
}
