package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/host/api"
	"github.com/fedhost/fedhost/host/deploy"
	"github.com/fedhost/fedhost/host/store"
)

// listen serves b's app on a loopback port until the test ends and returns its URL.
func (b *bundle) listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.ShutdownWithTimeout(time.Second) })
	return "http://" + ln.Addr().String()
}

// cutWithin sends what to a new connection, then waits, and returns how long the server
// took to close it; it fails the test if the server keeps it open longer than limit.
func cutWithin(t *testing.T, addr, what string, limit time.Duration) time.Duration {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	_, err = io.WriteString(conn, what)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(limit)))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	require.False(t, err != nil && errorAs(err, &ne) && ne.Timeout(), "the connection is still open after %s", limit)
	return time.Since(start)
}

func errorAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

var shortTimeouts = api.Server{ReadTimeout: 500 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, IdleTimeout: 500 * time.Millisecond}

// A client that sends half its headers and waits, or keeps a connection idle, is cut
// within the server's timeouts.
func TestSlowClientsAreCut(t *testing.T) {
	t.Parallel()
	b := setupWith(t, shortTimeouts, deploy.Options{})
	url := b.listen(t)
	took := cutWithin(t, url, "GET /healthz HTTP/1.1\r\nHost: fedhost.test\r\nX-Half: ", 3*time.Second)
	require.GreaterOrEqual(t, took, 200*time.Millisecond)
	took = cutWithin(t, url, "GET /healthz HTTP/1.1\r\nHost: fedhost.test\r\n\r\n", 3*time.Second)
	require.GreaterOrEqual(t, took, 200*time.Millisecond, "a kept-alive connection waits IdleTimeout")
	cutWithin(t, url, "POST /api/v1/login HTTP/1.1\r\nHost: fedhost.test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"na", 3*time.Second)
}

// A build's event stream stays open past the write timeout while it flows, and ends
// with the build.
func TestEventStreamOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	b := setupWith(t, shortTimeouts, deploy.Options{})
	alice := b.user(t, "alice", false)
	status, body := b.do(t, alice, "POST", "/api/v1/deployments", `{"namespace":"alice"}`)
	require.Equal(t, http.StatusCreated, status)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(body, &d))
	ctx := context.Background()
	build, err := b.st.CreateBuild(ctx, d.ID)
	require.NoError(t, err)
	require.NoError(t, b.st.SetBuildState(ctx, build.ID, store.BuildRunning, ""))

	url := b.listen(t)
	req, err := http.NewRequest("GET", url+"/api/v1/builds/"+build.ID+"/events", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: alice.cookie})
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)

	const open = 2 * time.Second
	go func() {
		time.Sleep(open)
		_, _ = b.st.AppendBuildEvent(ctx, store.BuildEvent{BuildID: build.ID, Step: "verdict", Level: "info", Message: "done", Progress: 100})
		_ = b.st.SetBuildState(ctx, build.ID, store.BuildSucceeded, "")
	}()
	start := time.Now()
	var events []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if e, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, e)
		}
	}
	require.NoError(t, sc.Err(), "the stream is not cut before the build ends")
	require.GreaterOrEqual(t, time.Since(start), open-100*time.Millisecond)
	require.Equal(t, []string{"progress", "end"}, events)
}

// Every refusal has its own code, the API's answers carry the security headers, and the
// forwarding headers count only from a trusted proxy.
func TestHTTPRefusalsHeadersAndProxies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := b.listen(t)

	// The server answers and closes while the client may still be writing the headers:
	// a write cut by that close is tried again, the answer is what is checked.
	var res *http.Response
	for try := 0; ; try++ {
		req, err := http.NewRequest("GET", url+"/api/v1/me", nil)
		require.NoError(t, err)
		req.Header.Set("X-Huge", strings.Repeat("h", 8<<10))
		res, err = http.DefaultClient.Do(req)
		if err != nil && try < 10 && (strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "connection reset")) {
			continue
		}
		require.NoError(t, err)
		break
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, res.StatusCode)
	require.Equal(t, "headers_too_large", errorCode(t, raw))
	require.NotContains(t, string(raw), "hhhh")

	for _, path := range []string{"/api/v1/me", "/api/v1/openapi.json", "/healthz", "/api/v1/nothing"} {
		res, err := http.Get(url + path)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"), path)
		require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"), path)
		require.Equal(t, "same-origin", res.Header.Get("Referrer-Policy"), path)
		require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
	}

	// What a handler sees of the client through the server's configuration.
	probe := func(srv api.Server) (proto, ip string) {
		app := fiber.New(api.Config(srv))
		app.Get("/", func(c *fiber.Ctx) error { return c.SendString(c.Protocol() + " " + c.IP()) })
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() { _ = app.Listener(ln) }()
		defer app.Shutdown()
		req, err := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
		require.NoError(t, err)
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Real-IP", "203.0.113.9")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		proto, ip, _ = strings.Cut(string(raw), " ")
		return proto, ip
	}
	proto, ip := probe(api.DefaultServer)
	require.Equal(t, []string{"http", "127.0.0.1"}, []string{proto, ip}, "no client is trusted by default")
	proto, ip = probe(api.Server{TrustedProxies: []string{"10.0.0.0/8"}})
	require.Equal(t, []string{"http", "127.0.0.1"}, []string{proto, ip}, "nor one that is not listed")
	proto, ip = probe(api.Server{TrustedProxies: []string{"127.0.0.0/8"}})
	require.Equal(t, []string{"https", "203.0.113.9"}, []string{proto, ip}, "a listed proxy is believed")
}
