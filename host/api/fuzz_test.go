package api_test

import (
	"context"
	"encoding/json"
	"github.com/gofiber/fiber/v2"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/audit"
	"github.com/fedhost/fedhost/host/auth"
	"github.com/fedhost/fedhost/host/catalog"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/plugins"
	"github.com/fedhost/fedhost/host/queue"
	"github.com/fedhost/fedhost/host/store"
)

// fuzzRoutes are the routes that read a request body. {id} is a deployment of the
// signed-in superuser.
var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/api/v1/login"},
	{"POST", "/api/v1/tokens"},
	{"POST", "/api/v1/deployments"},
	{"POST", "/api/v1/deployments/{id}/submit"},
	{"POST", "/api/v1/deployments/{id}/preview"},
	{"PUT", "/api/v1/deployments/{id}/update-policy"},
	{"POST", "/api/v1/deployments/{id}/operations/backup"},
	{"POST", "/api/v1/users"},
	{"POST", "/api/v1/deployments/{id}/users"},
	{"POST", "/api/v1/password-links/use"},
	{"POST", "/api/v1/contacts"},
	{"POST", "/api/v1/domains/check"},
	{"POST", "/api/v1/deployments/{id}/domain/register"},
	{"PUT", "/api/v1/deployments/{id}/domain/renewal"},
	{"POST", "/api/v1/deployments/{id}/domain/transfer"},
}

// fuzzContentTypes are what a client may say the body is; the handlers that use
// BodyParser read several of them.
var fuzzContentTypes = []string{
	"application/json",
	"application/x-www-form-urlencoded",
	"multipart/form-data; boundary=fuzz",
	"application/xml",
	"text/plain",
	"",
}

// FuzzRequestBodies sends any body to every route that reads one, as a signed-in
// superuser (the log-in anonymously): whatever the body, the answer is not a 500, an
// error is the API's JSON error, and no error shows a value of the body.
func FuzzRequestBodies(f *testing.F) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Database: "sqlite", DataDir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	m, err := plugins.New(plugins.Options{Dir: f.TempDir(), DataDir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	trail := audit.New(st, audit.Options{})
	// Cheap hashes: the fuzzer logs in thousands of times.
	accounts := auth.New(st, auth.Options{Audit: trail, Params: auth.Params{Memory: 8, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}})
	cat, err := catalog.Load(ctx, m) // no app plugins: a catalog of no apps
	if err != nil {
		f.Fatal(err)
	}
	engine := deploy.New(deploy.Options{Store: st, Plugins: m, Catalog: cat})
	// Builds are queued and never run: a second submit is refused as one is queued.
	q, err := queue.New(st, queue.Config{Builder: queue.BuilderFunc(func(context.Context, string, func(string, string)) error { return nil })})
	if err != nil {
		f.Fatal(err)
	}
	engine.SetQueue(q)
	app := fiber.New(api.Config(api.DefaultServer))
	api.Mount(app, api.Deps{Plugins: m, Engine: engine, Store: st, Auth: accounts, Audit: trail, Version: "1.2.3"})

	root, _, err := accounts.CreateUser(ctx, "root", true)
	if err != nil {
		f.Fatal(err)
	}
	session, err := accounts.NewSession(ctx, root.ID)
	if err != nil {
		f.Fatal(err)
	}
	d, err := engine.Create(ctx, root.ID, "Fuzzed", "fuzzed")
	if err != nil {
		f.Fatal(err)
	}

	for _, seed := range []struct {
		route, contentType uint8
		body               string
	}{
		{0, 0, `{"name":"root","password":"wrong-password"}`},
		{0, 0, `{"name":"","password":""}`},
		{0, 1, "name=root&password=wrong-password"},
		{0, 2, "--fuzz\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nroot\r\n--fuzz--\r\n"},
		{0, 3, "<login><name>root</name><password>wrong-password</password></login>"},
		{1, 0, `{"name":"ci-token","lifetime_days":30}`},
		{1, 0, `{"name":"ci-token","lifetime_days":1e400}`},
		{1, 0, `{"name":"ci-token","lifetime_days":-9223372036854775808}`},
		{2, 0, `{"name":"Blog","namespace":"blog-one"}`},
		{2, 0, `{"name":"Blog","namespace":"Not A Namespace!"}`},
		{2, 0, `{"name":"Blog","namespace":"fuzzed"}`},
		{3, 0, `{"domain":"example.org","apps":{"miniflux":{"enable":true}}}`},
		{3, 0, `{"domain":"secret-domain-value"}`},
		{3, 0, `{"domain":"example.org"}`},
		{4, 0, `{"domain":"example.org","apps":{}}`},
		{5, 0, `{"policy":"window","window":{"days":["mon"],"start":"02:00","end":"04:00"}}`},
		{5, 0, `{"policy":"sometimes-secret"}`},
		{6, 0, `{"app":"miniflux","snapshot":"latest"}`},
		{7, 0, `{"name":"alice","superuser":false}`},
		{7, 0, `{"name":"Not-A-Valid-User-Name!"}`},
		{7, 1, "name=bob&superuser=true"},
		{8, 0, `{"name":"Alice","email":"secret-mail@acme.test","phone":"+49-secret","street":"s","city":"c","postal_code":"p","country":"Secretland"}`},
		{9, 0, `{"registrar":"secret-registrar","domain":"Secret Domain!"}`},
		{10, 0, `{"registrar":"secret-registrar","contact_id":"secret-contact","price_micros":9730000,"currency":"USD"}`},
		{11, 0, `{"renewal":"sometimes-secret"}`},
		{12, 0, `{"registrar":"porkbun","auth_code":"secret-auth-code","price_micros":9730000,"currency":"USD"}`},
		{3, 4, "not json at all"},
		{3, 5, ""},
	} {
		f.Add(seed.route, seed.contentType, seed.body)
	}
	// A listener rather than app.Test: what fasthttp refuses before any handler (a
	// malformed multipart body) is answered by the server's error handler as in serve.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	f.Cleanup(func() { _ = app.Shutdown() })
	base := "http://" + ln.Addr().String()

	// send answers a request of route with body, the error decoded when there is one.
	send := func(t testing.TB, route, contentType uint8, body string) (int, *api.Error, string) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req, err := http.NewRequest(r.method, base+strings.ReplaceAll(r.path, "{id}", d.ID), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ct := fuzzContentTypes[int(contentType)%len(fuzzContentTypes)]; ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if r.path != "/api/v1/login" {
			req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: session.ID})
			req.Header.Set("X-CSRF-Token", session.CSRFToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var answer struct {
			Error *api.Error `json:"error"`
		}
		if resp.StatusCode >= 400 && (json.Unmarshal(raw, &answer) != nil || answer.Error == nil || answer.Error.Code == "") {
			t.Fatalf("%s %s answered %d without the API's error: %s", r.method, r.path, resp.StatusCode, raw)
		}
		return resp.StatusCode, answer.Error, string(raw)
	}

	// fixed is what the errors of each route say whatever the body, and the schema,
	// whose patterns and names a validation error quotes: a value found in them is not
	// an echo.
	fixed := make([]string, len(fuzzRoutes))
	for i := range fuzzRoutes {
		fixed[i] = string(cat.Schema()) + " " + fuzzRoutes[i].path
		for ct := range fuzzContentTypes {
			for _, body := range []string{"", "{}", "not json", `{"name":"nobody","password":"wrong","namespace":"","app":"","policy":""}`} {
				if _, e, _ := send(f, uint8(i), uint8(ct), body); e != nil {
					fixed[i] += " " + e.Message + " " + e.Location
				}
			}
		}
	}

	f.Fuzz(func(t *testing.T, route, contentType uint8, body string) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		status, e, raw := send(t, route, contentType, body)
		if status >= 500 {
			t.Fatalf("%s %s answered %d: %s", r.method, r.path, status, raw)
		}
		if e == nil {
			return
		}
		shown := e.Message + " " + e.Location
		for _, v := range bodyValues(body) {
			if len(v) >= 6 && strings.Contains(shown, v) && !strings.Contains(fixed[int(route)%len(fuzzRoutes)], v) {
				t.Fatalf("%s %s answered %d showing %q of the body: %s", r.method, r.path, status, v, raw)
			}
		}
	})
}

// bodyValues are the body itself, its lines and the strings in it: the values of a JSON
// body, or of a form.
func bodyValues(body string) []string {
	out := append([]string{body}, strings.FieldsFunc(body, func(r rune) bool { return r == '\r' || r == '\n' })...)
	var v any
	if json.Unmarshal([]byte(body), &v) == nil {
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for _, e := range v {
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			case string:
				out = append(out, v)
			}
		}
		walk(v)
		return out
	}
	if form, err := url.ParseQuery(body); err == nil {
		for _, vs := range form {
			out = append(out, vs...)
		}
	}
	return out
}
