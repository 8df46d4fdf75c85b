package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/contract"
	"github.com/fedhost/fedhost/sdk/resource"
)

func TestRouteServesHTTPSOverHTTP2(t *testing.T) {
	t.Parallel()
	f := newFrontDoor(t)
	ca := newCA(t)
	up := upstream(t, "feeds")
	hosts := []string{"feeds.acme.test", "www.acme.test"}
	res, err := f.provision(t, "acme", "miniflux-route", routeSpec(t, hosts, up.Listener.Addr().String(), ca.issue(t, hosts...)), ca.keyPEM)
	require.NoError(t, err)
	require.Equal(t, []string{f.httpsURL(hosts[0], "/"), f.httpsURL(hosts[1], "/")}, res.URLs)

	c := f.client(ca)
	for _, h := range hosts {
		resp, err := c.Get(f.httpsURL(h, "/entries?x=1"))
		require.NoError(t, err)
		body := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.Equal(t, 2, resp.ProtoMajor, "HTTP/2 through the front door")
		require.Equal(t, "feeds "+h, body, "the upstream's answer, with the host asked for")
		require.NotEmpty(t, resp.TLS.VerifiedChains, "the chain verifies against the test CA")
		require.Equal(t, hosts, resp.TLS.PeerCertificates[0].DNSNames, "the route's own certificate")
	}

	// Plain HTTP is redirected to HTTPS, on the HTTPS port.
	resp, err := c.Get(f.httpURL(hosts[0], "/entries?x=1"))
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusPermanentRedirect, resp.StatusCode)
	require.Equal(t, f.httpsURL(hosts[0], "/entries?x=1"), resp.Header.Get("Location"))

	// A name no route serves gets no certificate at all.
	_, err = c.Get(f.httpsURL("other.acme.test", "/"))
	require.Error(t, err)

	// A request for one host on a connection opened for another is refused.
	req, err := http.NewRequest(http.MethodGet, f.httpsURL(hosts[0], "/"), nil)
	require.NoError(t, err)
	req.Host = "elsewhere.test"
	resp, err = c.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	_, err := bufio.NewReader(resp.Body).WriteTo(&b)
	require.NoError(t, err)
	return b.String()
}

func TestAnotherTenantCannotTakeAHost(t *testing.T) {
	t.Parallel()
	f := newFrontDoor(t)
	ca := newCA(t)
	up := upstream(t, "acme")
	_, err := f.provision(t, "acme", "miniflux-route", routeSpec(t, []string{"feeds.acme.test"}, up.Listener.Addr().String(), ca.issue(t, "feeds.acme.test")), ca.keyPEM)
	require.NoError(t, err)

	other := upstream(t, "intruder")
	hosts := []string{"intruder.test", "feeds.acme.test"}
	_, err = f.provision(t, "intruder", "miniflux-route", routeSpec(t, hosts, other.Listener.Addr().String(), ca.issue(t, hosts...)), ca.keyPEM)
	require.Equal(t, sdk.CodeConflict, sdk.CodeOf(err), "%v", err)
	require.Equal(t, "request/hosts/1", sdk.FieldOf(err))
	require.Contains(t, err.Error(), "feeds.acme.test")

	// The host still goes to its tenant, and the refused route took nothing.
	c := f.client(ca)
	status, body, err := get(c, f.httpsURL("feeds.acme.test", "/"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "acme feeds.acme.test", body)
	_, err = c.Get(f.httpsURL("intruder.test", "/"))
	require.Error(t, err, "the refused route has no certificate in Caddy")

	// Once its tenant removes the route, the host is free.
	f.deprovision(t, "acme", "miniflux-route")
	_, err = f.provision(t, "intruder", "miniflux-route", routeSpec(t, hosts, other.Listener.Addr().String(), ca.issue(t, hosts...)), ca.keyPEM)
	require.NoError(t, err)
	status, body, err = get(c, f.httpsURL("feeds.acme.test", "/"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "intruder feeds.acme.test", body)
}

func TestAccessLogPerTenant(t *testing.T) {
	t.Parallel()
	f := newFrontDoor(t)
	ca := newCA(t)
	up := upstream(t, "feeds")
	_, err := f.provision(t, "acme", "miniflux-route", routeSpec(t, []string{"feeds.acme.test"}, up.Listener.Addr().String(), ca.issue(t, "feeds.acme.test")), ca.keyPEM)
	require.NoError(t, err)
	_, err = f.provision(t, "globex", "miniflux-route", routeSpec(t, []string{"feeds.globex.test"}, up.Listener.Addr().String(), ""), nil)
	require.NoError(t, err)

	c := f.client(ca)
	req, err := http.NewRequest(http.MethodGet, f.httpsURL("feeds.acme.test", "/entries?token=s3cr3t-query"), nil)
	require.NoError(t, err)
	req.Header.Set("Cookie", "session=s3cr3t-cookie")
	req.Header.Set("Authorization", "Bearer s3cr3t-bearer")
	resp, err := c.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	status, body, err := get(c, f.httpURL("feeds.globex.test", "/plain"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "a route without tls is served on http_port")
	require.Equal(t, "feeds feeds.globex.test", body)

	line := waitLogLine(t, filepath.Join(f.dataDir, logsDirName, "acme.log"))
	t.Logf("an access log line: %s", line)
	var entry struct {
		Logger  string `json:"logger"`
		Status  int    `json:"status"`
		Request struct {
			Host    string              `json:"host"`
			URI     string              `json:"uri"`
			Proto   string              `json:"proto"`
			Headers map[string][]string `json:"headers"`
		} `json:"request"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
	require.Equal(t, "http.log.access."+loggerName("acme"), entry.Logger)
	require.Equal(t, "/entries", entry.Request.URI, "the query string is cut")
	require.Equal(t, "feeds.acme.test:"+strconv.Itoa(f.httpsPort), entry.Request.Host)
	require.Equal(t, http.StatusOK, entry.Status)
	require.NotContains(t, line, "s3cr3t", "no query, cookie or authorization in the log")
	require.NotContains(t, entry.Request.Headers, "Cookie")

	globex := waitLogLine(t, filepath.Join(f.dataDir, logsDirName, "globex.log"))
	require.Contains(t, globex, `"uri":"/plain"`)
	require.NotContains(t, globex, "acme", "each tenant's lines in its own file")
	acme, err := os.ReadFile(filepath.Join(f.dataDir, logsDirName, "acme.log"))
	require.NoError(t, err)
	require.NotContains(t, string(acme), "globex")
	fi, err := os.Stat(filepath.Join(f.dataDir, logsDirName, "acme.log"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// waitLogLine returns the first line of a log file once there is one.
func waitLogLine(t *testing.T, path string) string {
	t.Helper()
	var line string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			return false
		}
		line = strings.SplitN(string(b), "\n", 2)[0]
		return true
	}, 10*time.Second, 20*time.Millisecond, "no line in %s", path)
	return line
}

// configChanges counts the admin API requests that change Caddy's config, from Caddy's
// own log.
func (f *frontDoor) configChanges(t *testing.T) int {
	t.Helper()
	return f.adminRequests(t, "") - f.adminRequests(t, `"method":"GET"`)
}

// adminRequests counts the admin API requests in Caddy's own log whose line holds with.
func (f *frontDoor) adminRequests(t *testing.T, with string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dataDir, managedDirName, logFileName))
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"msg":"received request"`) && strings.Contains(line, with) {
			n++
		}
	}
	return n
}

func TestProvisionAgainChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFrontDoor(t)
	ca := newCA(t)
	up := upstream(t, "feeds")
	spec := routeSpec(t, []string{"feeds.acme.test"}, up.Listener.Addr().String(), ca.issue(t, "feeds.acme.test"))
	first, err := f.provision(t, "acme", "miniflux-route", spec, ca.keyPEM)
	require.NoError(t, err)
	f.requirePrivate(t)
	before := f.configChanges(t)
	require.Positive(t, before)
	again, err := f.provision(t, "acme", "miniflux-route", spec, ca.keyPEM)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Equal(t, before, f.configChanges(t), "the same request again sent Caddy no change")

	// A new upstream is a change, made in place.
	other := upstream(t, "moved")
	_, err = f.provision(t, "acme", "miniflux-route", routeSpec(t, []string{"feeds.acme.test"}, other.Listener.Addr().String(), ca.issue(t, "feeds.acme.test")), ca.keyPEM)
	require.NoError(t, err)
	status, body, err := get(f.client(ca), f.httpsURL("feeds.acme.test", "/"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "moved feeds.acme.test", body)

	ctx := context.Background()
	st, err := f.rc.Status(ctx, resource.Request{Tenant: "acme", Instance: "miniflux-route", Type: contract.Route})
	require.NoError(t, err)
	require.Equal(t, "ready", st.State, st.Message)
	f.deprovision(t, "acme", "miniflux-route")
	st, err = f.rc.Status(ctx, resource.Request{Tenant: "acme", Instance: "miniflux-route", Type: contract.Route})
	require.NoError(t, err)
	require.Equal(t, "missing", st.State)
	entries, err := os.ReadDir(filepath.Join(f.dataDir, routesDir))
	require.NoError(t, err)
	require.Empty(t, entries, "deprovision removes the record and its key")
	_, err = f.client(ca).Get(f.httpsURL("feeds.acme.test", "/"))
	require.Error(t, err, "deprovision removes the certificate")
}

// TestStreamSurvivesAnotherRouteChange holds a streaming response through route A open
// while route B is added and removed: Caddy's config changes by @id keep its listeners,
// and a request under way finishes on the handlers it started on.
func TestStreamSurvivesAnotherRouteChange(t *testing.T) {
	t.Parallel()
	f := newFrontDoor(t)
	ca := newCA(t)
	const chunks = 40
	stream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range chunks {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	t.Cleanup(stream.Close)
	_, err := f.provision(t, "acme", "a", routeSpec(t, []string{"a.acme.test"}, stream.Listener.Addr().String(), ca.issue(t, "a.acme.test")), ca.keyPEM)
	require.NoError(t, err)

	resp, err := f.client(ca).Get(f.httpsURL("a.acme.test", "/events"))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 2, resp.ProtoMajor)
	sc := bufio.NewScanner(resp.Body)
	got := 0
	next := func() {
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				require.Equal(t, "data: "+strconv.Itoa(got), sc.Text())
				got++
				return
			}
		}
		require.NoError(t, sc.Err())
		t.Fatalf("the stream ended after %d of %d events", got, chunks)
	}
	next()

	up := upstream(t, "b")
	_, err = f.provision(t, "globex", "b", routeSpec(t, []string{"b.globex.test"}, up.Listener.Addr().String(), ca.issue(t, "b.globex.test")), ca.keyPEM)
	require.NoError(t, err)
	next()
	status, body, err := get(f.client(ca), f.httpsURL("b.globex.test", "/"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "b b.globex.test", body)
	f.deprovision(t, "globex", "b")
	for got < chunks {
		next()
	}
	require.Equal(t, chunks, got, "every event of the stream arrived")
	require.Equal(t, 1, f.adminRequests(t, `"uri":"/load"`), "one /load, when Caddy started; every change after it by @id")
}

// TestCaddyRestartedAfterKill kills the managed Caddy with SIGKILL: the plugin starts it
// again and gives it its routes back.
func TestCaddyRestartedAfterKill(t *testing.T) {
	t.Parallel()
	f := newFrontDoor(t)
	ca := newCA(t)
	up := upstream(t, "feeds")
	_, err := f.provision(t, "acme", "miniflux-route", routeSpec(t, []string{"feeds.acme.test"}, up.Listener.Addr().String(), ca.issue(t, "feeds.acme.test")), ca.keyPEM)
	require.NoError(t, err)
	pid := f.caddyPid(t)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	killed := time.Now()
	f.waitServed(t, ca, "feeds.acme.test", "feeds feeds.acme.test")
	t.Logf("the route answered again %v after kill -9 of Caddy", time.Since(killed).Round(time.Millisecond))
	require.NotEqual(t, pid, f.caddyPid(t), "a new Caddy")
	require.Contains(t, f.logs.String(), "the managed caddy exited: restarting it")
}

// TestPluginRestartGivesRoutesBack stops the plugin outright, as a host restart does:
// a new plugin process on the same data dir starts Caddy with every recorded route.
func TestPluginRestartGivesRoutesBack(t *testing.T) {
	t.Parallel()
	f := newFrontDoor(t)
	ca := newCA(t)
	up := upstream(t, "feeds")
	_, err := f.provision(t, "acme", "miniflux-route", routeSpec(t, []string{"feeds.acme.test"}, up.Listener.Addr().String(), ca.issue(t, "feeds.acme.test")), ca.keyPEM)
	require.NoError(t, err)
	_, err = f.provision(t, "globex", "miniflux-route", routeSpec(t, []string{"feeds.globex.test"}, up.Listener.Addr().String(), ""), nil)
	require.NoError(t, err)
	oldCaddy := f.caddyPid(t)
	f.plugin.Kill()
	stopped := time.Now()
	f.start(t)
	f.waitServed(t, ca, "feeds.acme.test", "feeds feeds.acme.test")
	t.Logf("the routes answered again %v after the plugin was killed", time.Since(stopped).Round(time.Millisecond))
	status, body, err := get(f.client(ca), f.httpURL("feeds.globex.test", "/"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "feeds feeds.globex.test", body)
	require.Error(t, syscall.Kill(oldCaddy, 0), "the old Caddy is gone")
	st, err := f.rc.Status(context.Background(), resource.Request{Tenant: "acme", Instance: "miniflux-route", Type: contract.Route})
	require.NoError(t, err)
	require.Equal(t, "ready", st.State, st.Message)
}

// waitServed waits until https://host/ answers want.
func (f *frontDoor) waitServed(t *testing.T, ca *testCA, host, want string) {
	t.Helper()
	c := f.client(ca)
	c.Timeout = time.Second
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body, err := get(c, f.httpsURL(host, "/"))
		if err == nil && status == http.StatusOK && body == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 30s: %d %q %v\nplugin log:\n%s", host, status, body, err, f.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLeftoverCaddyIsEnded: a Caddy of an earlier plugin process that outlived it (its
// Pdeathsig lost) is ended through the pid file before a new one starts.
func TestLeftoverCaddyIsEnded(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "fh-caddy-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	m, err := prepareManaged(dir, caddyBin)
	require.NoError(t, err)
	bootstrap := filepath.Join(m.dir, "bootstrap.json")
	b, err := json.Marshal(object{"admin": adminConfig(m.socket())})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bootstrap, b, 0o600))
	stray := exec.Command(caddyBin, "run", "--config", bootstrap)
	require.NoError(t, stray.Start())
	waited := make(chan struct{})
	go func() { _ = stray.Wait(); close(waited) }()
	t.Cleanup(func() { _ = stray.Process.Kill(); <-waited })
	require.NoError(t, os.WriteFile(filepath.Join(m.dir, pidFileName), []byte(strconv.Itoa(stray.Process.Pid)), 0o600))
	require.Eventually(t, func() bool { _, err := os.Stat(m.socket()); return err == nil }, 10*time.Second, 10*time.Millisecond)

	https, plain := freePorts(t)
	f := &frontDoor{dataDir: dir, httpsPort: https, httpPort: plain, settings: testSettings(t, https, plain)}
	f.start(t)
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the leftover Caddy still runs")
	}
	require.NotEqual(t, stray.Process.Pid, f.caddyPid(t))
	up := upstream(t, "feeds")
	_, err = f.provision(t, "acme", "miniflux-route", routeSpec(t, []string{"feeds.acme.test"}, up.Listener.Addr().String(), ""), nil)
	require.NoError(t, err)
	status, body, err := get(f.client(nil), f.httpURL("feeds.acme.test", "/"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "feeds feeds.acme.test", body)
}

// runCaddy starts a Caddy that is not the plugin's, its admin API on socket.
func runCaddy(t *testing.T, dir, socket string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	bootstrap := filepath.Join(dir, "bootstrap.json")
	b, err := json.Marshal(object{"admin": adminConfig(socket)})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bootstrap, b, 0o600))
	_ = os.Remove(socket)
	cmd := exec.Command(caddyBin, "run", "--config", bootstrap)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	require.NoError(t, cmd.Start())
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })
	require.Eventually(t, func() bool { _, err := os.Stat(socket); return err == nil }, 10*time.Second, 10*time.Millisecond)
	return cmd, waited
}

// TestNotManaged drives a Caddy the plugin did not start; when that Caddy restarts empty,
// the next change gives it every recorded route again.
func TestNotManaged(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "fh-caddy-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	caddyDir := filepath.Join(dir, "theirs")
	require.NoError(t, os.Mkdir(caddyDir, 0o700))
	socket := filepath.Join(caddyDir, "admin.sock")
	theirs, theirsEnded := runCaddy(t, caddyDir, socket)

	https, plain := freePorts(t)
	raw, err := json.Marshal(map[string]any{"admin_socket": socket, "listen": "127.0.0.1", "https_port": https, "http_port": plain})
	require.NoError(t, err)
	f := &frontDoor{dataDir: filepath.Join(dir, "plugin"), httpsPort: https, httpPort: plain, settings: raw}
	require.NoError(t, os.Mkdir(f.dataDir, 0o700))
	f.start(t)
	up := upstream(t, "feeds")
	_, err = f.provision(t, "acme", "a", routeSpec(t, []string{"a.acme.test"}, up.Listener.Addr().String(), ""), nil)
	require.NoError(t, err)
	status, body, err := get(f.client(nil), f.httpURL("a.acme.test", "/"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "feeds a.acme.test", body)
	_, err = os.Stat(filepath.Join(f.dataDir, managedDirName))
	require.True(t, os.IsNotExist(err), "no managed Caddy")

	// Their Caddy restarts with nothing but its admin socket.
	require.NoError(t, theirs.Process.Kill())
	<-theirsEnded
	runCaddy(t, caddyDir, socket)
	st, err := f.rc.Status(context.Background(), resource.Request{Tenant: "acme", Instance: "a", Type: contract.Route})
	require.NoError(t, err)
	require.Equal(t, "degraded", st.State, "recorded, not in Caddy")

	_, err = f.provision(t, "acme", "b", routeSpec(t, []string{"b.acme.test"}, up.Listener.Addr().String(), ""), nil)
	require.NoError(t, err)
	for _, h := range []string{"a.acme.test", "b.acme.test"} {
		status, body, err := get(f.client(nil), f.httpURL(h, "/"))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "feeds "+h, body)
	}
}

// requirePrivate checks that everything the plugin and its Caddy wrote in the data dir
// is the plugin's alone: files 0600, directories 0700 (the admin socket is inside one).
func (f *frontDoor) requirePrivate(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir(f.dataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == f.dataDir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), path)
		case fi.Mode().IsRegular():
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), path)
		}
		return nil
	})
	require.NoError(t, err)
}

// TestBadRecordKeepsNoOtherRouteDown: a record Caddy refuses (a certificate that is not
// one) makes the one /load of a restart fail; the plugin then gives the routes one by one
// and the good one answers.
func TestBadRecordKeepsNoOtherRouteDown(t *testing.T) {
	t.Parallel()
	f := newFrontDoor(t)
	ca := newCA(t)
	up := upstream(t, "feeds")
	_, err := f.provision(t, "acme", "good", routeSpec(t, []string{"good.acme.test"}, up.Listener.Addr().String(), ca.issue(t, "good.acme.test")), ca.keyPEM)
	require.NoError(t, err)
	st := store{dir: f.dataDir}
	require.NoError(t, st.save(&record{Tenant: "acme", Instance: "bad", Hosts: []string{"bad.acme.test"}, Upstream: "127.0.0.1:1", Certificate: "not a certificate", key: []byte("not a key")}))

	f.plugin.Kill()
	f.start(t)
	f.waitServed(t, ca, "good.acme.test", "feeds good.acme.test")
	require.Contains(t, f.logs.String(), "caddy refused the recorded routes together")
	require.Contains(t, f.logs.String(), "caddy refused a recorded route")
	status, err := f.rc.Status(context.Background(), resource.Request{Tenant: "acme", Instance: "bad", Type: contract.Route})
	require.NoError(t, err)
	require.Equal(t, "degraded", status.State, status.Message)
}
