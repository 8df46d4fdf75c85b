package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/sdk"
	pluginclient "github.com/fedhost/fedhost/sdk/client"
)

// The Miniflux plugin moves its fetch options under fetcher from 2.3.6 (renames Since
// 2.3.6). Validating against 2.3.6, as an update or an import to it does, moves a
// configuration made for 2.3.5, or of no known version; one made for 2.3.6 already is
// judged as it is, so a flat option there is refused, named.
func TestRenameSinceAppliesOnlyFromBelowIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "plugins")
	lock := plugins.Lock{}
	for name, flags := range map[string]string{"fedhost-app-miniflux": "", "fedhost-app-miniflux_2.3.6": "-X main.version=2.3.6"} {
		bin := filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-ldflags", flags, "-o", bin, "../../plugins/apps/miniflux").CombinedOutput()
		require.NoError(t, err, "%s", out)
		sum, err := pluginclient.FileSHA256(bin)
		require.NoError(t, err)
		lock[name] = sum
	}
	require.NoError(t, lock.Write(dir))
	m, err := plugins.New(plugins.Options{Dir: dir, DataDir: t.TempDir(), Logger: hclog.NewNullLogger(),
		Settings: func(sdk.Description) (json.RawMessage, bool) { return nil, true }})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(m.Stop)
	cat, err := catalog.Load(ctx, m)
	require.NoError(t, err)
	a, ok := cat.App("miniflux")
	require.True(t, ok)
	require.Equal(t, "2.3.6", a.Version)
	e := &Engine{opts: Options{Catalog: cat}}

	flat := json.RawMessage(`{"domain":"x.example.org","apps":{"miniflux":{"enable":true,"options":{"httpClientTimeout":45,"fetcherAllowPrivateNetworks":true}}}}`)
	for _, from := range []map[string]string{{"miniflux": "2.3.5"}, nil} {
		out, _, unmigrated, err := e.validate(ctx, flat, "", from, nil)
		require.NoError(t, err, "from %v", from)
		require.Empty(t, unmigrated)
		var cfg struct {
			Apps struct {
				Miniflux struct {
					Options map[string]json.RawMessage `json:"options"`
				} `json:"miniflux"`
			} `json:"apps"`
		}
		require.NoError(t, json.Unmarshal(out, &cfg))
		require.JSONEq(t, `{"timeout":45,"allowPrivateNetworks":true}`, string(cfg.Apps.Miniflux.Options["fetcher"]), "from %v", from)
		require.NotContains(t, cfg.Apps.Miniflux.Options, "httpClientTimeout")
	}
	// A stored secret's reference (a flat fetch option stands for one here) moves as its
	// option does: validate returns the references to keep, renamed, and a required
	// secret kept at the old name would count as set at the new one.
	noOptions := json.RawMessage(`{"domain":"x.example.org","apps":{"miniflux":{"enable":true,"options":{}}}}`)
	kept := map[string]string{"/apps/miniflux/options/httpClientTimeout": "ref-1"}
	_, refs, _, err := e.validate(ctx, noOptions, "", map[string]string{"miniflux": "2.3.5"}, kept)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"/apps/miniflux/options/fetcher/timeout": "ref-1"}, refs)
	_, refs, _, err = e.validate(ctx, noOptions, "", map[string]string{"miniflux": "2.3.6"}, kept)
	require.NoError(t, err)
	require.Equal(t, kept, refs, "made for 2.3.6: nothing moves")

	_, _, _, err = e.validate(ctx, flat, "", map[string]string{"miniflux": "2.3.6"}, nil)
	var de *Error
	require.True(t, errors.As(err, &de), "%v", err)
	require.Equal(t, CodeInvalidConfiguration, de.Code)
	require.Regexp(t, "/apps/miniflux/options/(httpClientTimeout|fetcherAllowPrivateNetworks): This is not a known option", de.Error(), "the refusal names an option 2.3.6 does not have")

	// 2.3.5's own catalog renames nothing: its schema still has the flat options.
	old, err := cat.At(map[string]string{"miniflux": "2.3.5"})
	require.NoError(t, err)
	out, _, err := old.ApplyRenames(flat, nil)
	require.NoError(t, err)
	require.JSONEq(t, string(flat), string(out))
	require.Empty(t, old.Check(out))
}
