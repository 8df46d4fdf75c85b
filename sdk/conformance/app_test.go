package conformance_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/fedhost/fedhost/sdk/conformance"
)

// recorder is a testing.TB that keeps the failures of the checks it is given instead of
// failing the test; Fatalf ends the checks' goroutine as testing does.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// runApp runs conformance.App on the test app built as variant and returns its failures.
func runApp(t *testing.T, variant string, cases ...conformance.AppCase) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fedhost-app-test")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.variant="+variant, "-o", bin, "./testdata/app").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conformance.App(rec, bin, cases...)
	}()
	<-done
	return rec.failures
}

var appCases = []conformance.AppCase{
	{Name: "defaults"},
	{Name: "everything", Domain: "site.example.org", Config: json.RawMessage(
		`{"title":"Ours","admin":{"email":"boss@example.org","password":"correct horse battery"},"theme":"dark","links":[{"url":"https://example.net/"}]}`)},
}

func TestAppPassesASoundApp(t *testing.T) {
	t.Parallel()
	if failures := runApp(t, "", appCases...); len(failures) > 0 {
		t.Errorf("a sound app failed:\n%s", strings.Join(failures, "\n"))
	}
}

// Each broken variant fails with a message that names the problem and where it is.
func TestAppNamesWhatIsBroken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		variant string
		want    []string
	}{
		{"notjson", []string{"schema: Schema returned something that is not a JSON object"}},
		{"badschema", []string{"schema: does not compile as JSON Schema 2020-12", "/properties/theme/type"}},
		{"baddefault", []string{"the default at /$defs/link/properties/label/default does not validate against its own schema"}},
		{"unknowntype", []string{`defaults: request "db" has unknown resource type "postgres": use one of secret, postgresql`}},
		{"route", []string{`defaults: request "web" asks for a route: the host routes the app's host name (x-hostname) itself`}},
		{"emptyartifact", []string{`defaults: node "web" has an empty artifact: set artifact.binary`}},
		{"misc", []string{
			`node "web": env/DB_PASSWORD holds ${secret:...}: secrets go into files only`,
			`node "web": env/BASE: ${url:web} names no port of the node`,
			"the chain from /a comes back to /a",
			"rename 2 (name -> /title): From is not a JSON pointer",
			`operation 0 is named "Backup Now", which is not DNS-safe`,
			`operation "Backup Now" has no description`,
			`role group "admins" gives no role`,
		}},
	} {
		t.Run(c.variant, func(t *testing.T) {
			t.Parallel()
			failures := runApp(t, c.variant, appCases...)
			all := strings.Join(failures, "\n")
			t.Logf("the failures:\n%s", all)
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("no failure says %q; the failures:\n%s", w, all)
				}
			}
		})
	}
}

// A configuration of the author's that the schema refuses is named with its field.
func TestAppChecksTheCasesThemselves(t *testing.T) {
	t.Parallel()
	failures := runApp(t, "", conformance.AppCase{Name: "wrong", Config: json.RawMessage(`{"title":"a title that is far too long for the site"}`)})
	all := strings.Join(failures, "\n")
	if !strings.Contains(all, "wrong: the configuration (with the schema's defaults) does not validate: options/title") {
		t.Errorf("the failures do not name options/title:\n%s", all)
	}
}
