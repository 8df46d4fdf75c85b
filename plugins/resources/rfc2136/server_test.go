package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fedhost/fedhost/internal/bindtest"
	"github.com/fedhost/fedhost/internal/plugintest"
)

// testServer is the named every test of this binary shares, started by TestMain;
// pluginBinary is this package's plugin, built beside it.
var (
	testServer   *bindtest.Server
	pluginBinary string
)

func TestMain(m *testing.M) {
	hclog.SetDefault(hclog.NewNullLogger())
	plugintest.MainWithServer(m, "named", func(dir string) (func(), error) {
		s, stop, err := bindtest.Start(dir)
		if err != nil {
			return nil, err
		}
		testServer, pluginBinary = s, filepath.Join(dir, "fedhost-resource-rfc2136")
		if out, err := exec.Command("go", "build", "-o", pluginBinary, ".").CombinedOutput(); err != nil {
			stop()
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
		return stop, nil
	})
}

// settingsJSON are the plugin settings for the test server.
func settingsJSON() []byte {
	ts := testServer
	return fmt.Appendf(nil, `{"primary":%q,"nameservers":["ns1.provider.test","ns2.provider.test"],"rndc":{"address":"127.0.0.1","port":%d,"key_file":%q},"keys_file":%q,"zones_directory":%q,"wait_seconds":10}`,
		ts.DNSAddr, ts.ControlPort, ts.RNDCKeyFile, ts.KeysFile, ts.ZonesDir)
}

// namedLog is the end of named's log, for failures.
func namedLog() string { return testServer.Log() }
