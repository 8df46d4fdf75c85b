package incustest

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// client talks to the server as a trusted client, without the driver.
type client struct {
	t    *testing.T
	s    *Server
	tc   *tls.Config
	hc   *http.Client
	inst string
}

func newClient(t *testing.T) *client {
	s, err := Start(t.TempDir(), Image{Protocol: "oci", Server: "https://ghcr.io", Alias: "fedhost/httpserver:1"})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	cert, err := tls.LoadX509KeyPair(s.ClientCertFile, s.ClientKeyFile)
	require.NoError(t, err)
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}
	c := &client{t: t, s: s, tc: tc, hc: &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: time.Minute}}
	c.inst = "exec-test"
	op := c.call("POST", "/1.0/instances", map[string]any{"name": c.inst, "type": "container",
		"source": map[string]string{"type": "image", "protocol": "oci", "server": "https://ghcr.io", "alias": "fedhost/httpserver:1"},
		"config": map[string]string{"environment.NODE_VAR": "from the instance", "environment.OVERRIDDEN": "instance"}}, 202)
	c.wait(op)
	op = c.call("PUT", "/1.0/instances/"+c.inst+"/state", map[string]any{"action": "start"}, 202)
	c.wait(op)
	return c
}

type envelope struct {
	Type     string          `json:"type"`
	Error    string          `json:"error"`
	Metadata json.RawMessage `json:"metadata"`
}

type op struct {
	ID         string `json:"id"`
	Class      string `json:"class"`
	StatusCode int    `json:"status_code"`
	Err        string `json:"err"`
	MayCancel  bool   `json:"may_cancel"`
	Metadata   struct {
		FDs         map[string]string `json:"fds"`
		Return      *int              `json:"return"`
		Environment map[string]string `json:"environment"`
	} `json:"metadata"`
}

func (c *client) do(method, p string, body any) (int, envelope) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.s.URL+p, rd)
	require.NoError(c.t, err)
	resp, err := c.hc.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	var e envelope
	require.NoError(c.t, json.NewDecoder(resp.Body).Decode(&e))
	return resp.StatusCode, e
}

func (c *client) call(method, p string, body any, want int) op {
	code, e := c.do(method, p, body)
	require.Equal(c.t, want, code, e.Error)
	var o op
	if code == 202 {
		require.NoError(c.t, json.Unmarshal(e.Metadata, &o))
	}
	return o
}

func (c *client) wait(o op) op {
	for {
		_, e := c.do("GET", "/1.0/operations/"+o.ID+"/wait?timeout=30", nil)
		var got op
		require.NoError(c.t, json.Unmarshal(e.Metadata, &got))
		if got.StatusCode >= 200 {
			return got
		}
	}
}

func (c *client) dial(id, secret string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{TLSClientConfig: c.tc}
	return d.Dial("wss"+strings.TrimPrefix(c.s.URL, "https")+"/1.0/operations/"+id+"/websocket?secret="+secret, nil)
}

// execWS starts a command and connects its four websockets.
func (c *client) execWS(command ...string) (op, map[string]*websocket.Conn) {
	o := c.call("POST", "/1.0/instances/"+c.inst+"/exec", map[string]any{"command": command, "wait-for-websocket": true,
		"interactive": false, "environment": map[string]string{"OVERRIDDEN": "request"}, "cwd": "/srv/fedhost"}, 202)
	require.Equal(c.t, "websocket", o.Class)
	require.True(c.t, o.MayCancel)
	conns := map[string]*websocket.Conn{}
	for _, fd := range []string{"control", "0", "1", "2"} {
		require.Len(c.t, o.Metadata.FDs[fd], 64)
		conn, _, err := c.dial(o.ID, o.Metadata.FDs[fd])
		require.NoError(c.t, err)
		c.t.Cleanup(func() { conn.Close() })
		conns[fd] = conn
	}
	return o, conns
}

// readAll reads an output websocket until its barrier (an empty text message).
func readAll(t *testing.T, conn *websocket.Conn) string {
	var b strings.Builder
	for {
		mt, data, err := conn.ReadMessage()
		require.NoError(t, err)
		if mt == websocket.TextMessage {
			require.Empty(t, data)
			return b.String()
		}
		require.Equal(t, websocket.BinaryMessage, mt)
		b.Write(data)
	}
}

func closeStdin(t *testing.T, conn *websocket.Conn, data string) {
	if data != "" {
		require.NoError(t, conn.WriteMessage(websocket.BinaryMessage, []byte(data)))
	}
	require.NoError(t, conn.WriteMessage(websocket.TextMessage, []byte{}))
}

func TestExecWebsocket(t *testing.T) {
	c := newClient(t)
	o, conns := c.execWS("/bin/sh", "-c", `echo "out $NODE_VAR $OVERRIDDEN $LANG $HOME"; pwd; echo err >&2; read -r l; echo "in=$l"; exit 5`)
	require.Equal(t, "request", o.Metadata.Environment["OVERRIDDEN"])
	require.Equal(t, "from the instance", o.Metadata.Environment["NODE_VAR"])
	closeStdin(t, conns["0"], "hello\n")
	stdout := readAll(t, conns["1"])
	require.Equal(t, "err\n", readAll(t, conns["2"]))
	lines := strings.Split(stdout, "\n")
	require.Equal(t, "out from the instance request C.UTF-8 /root", lines[0])
	require.Equal(t, c.s.instanceDir(c.inst)+"/srv/fedhost", lines[1])
	require.Equal(t, "in=hello", lines[2])
	end := c.wait(o)
	require.Equal(t, 200, end.StatusCode, end.Err)
	require.NotNil(t, end.Metadata.Return)
	require.Equal(t, 5, *end.Metadata.Return)

	// The instance's directory goes with the instance.
	require.DirExists(t, c.s.instanceDir(c.inst))
	c.wait(c.call("PUT", "/1.0/instances/"+c.inst+"/state", map[string]any{"action": "stop", "force": true}, 202))
	c.wait(c.call("DELETE", "/1.0/instances/"+c.inst, nil, 202))
	_, err := os.Stat(c.s.instanceDir(c.inst))
	require.True(t, os.IsNotExist(err))
}

func TestExecRefusals(t *testing.T) {
	c := newClient(t)
	code, e := c.do("POST", "/1.0/instances/"+c.inst+"/exec", map[string]any{"command": []string{"true"}, "wait-for-websocket": true, "record-output": true})
	require.Equal(t, 400, code)
	require.Contains(t, e.Error, "Cannot use")

	o := c.call("POST", "/1.0/instances/"+c.inst+"/exec", map[string]any{"command": []string{"true"}, "wait-for-websocket": true}, 202)
	_, resp, err := c.dial(o.ID, strings.Repeat("0", 64))
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a wrong secret of an operation that exists")
	conn, _, err := c.dial(o.ID, o.Metadata.FDs["1"])
	require.NoError(t, err)
	defer conn.Close()
	_, resp, err = c.dial(o.ID, o.Metadata.FDs["1"])
	require.Error(t, err, "a stream connects once")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	c.call("DELETE", "/1.0/operations/"+o.ID, nil, 200)
	require.Equal(t, 401, c.wait(o).StatusCode)

	c.wait(c.call("PUT", "/1.0/instances/"+c.inst+"/state", map[string]any{"action": "stop", "force": true}, 202))
	code, e = c.do("POST", "/1.0/instances/"+c.inst+"/exec", map[string]any{"command": []string{"true"}, "wait-for-websocket": true})
	require.Equal(t, 400, code)
	require.Equal(t, "Instance is not running", e.Error)
}

func TestExecNotFound(t *testing.T) {
	c := newClient(t)
	o, conns := c.execWS("fedhost-nothere")
	closeStdin(t, conns["0"], "")
	readAll(t, conns["1"])
	end := c.wait(o)
	require.Equal(t, 400, end.StatusCode)
	require.Equal(t, "Command not found", end.Err)
	require.Equal(t, 127, *end.Metadata.Return)
}

// A signal on control reaches the command; control closed, or a DELETE, kills it.
func TestExecControl(t *testing.T) {
	c := newClient(t)
	for _, how := range []string{"signal", "close", "delete"} {
		t.Run(how, func(t *testing.T) {
			o, conns := c.execWS("/bin/sh", "-c", `echo $$; exec sleep 300`)
			closeStdin(t, conns["0"], "")
			_, first, err := conns["1"].ReadMessage()
			require.NoError(t, err)
			pid := strings.TrimSpace(string(first))
			switch how {
			case "signal":
				require.NoError(t, conns["control"].WriteJSON(map[string]any{"command": "signal", "signal": 15}))
			case "close":
				conns["control"].Close()
			case "delete":
				c.call("DELETE", "/1.0/operations/"+o.ID, nil, 200)
			}
			end := c.wait(o)
			want := map[string]int{"signal": 200, "close": 200, "delete": 401}[how]
			require.Equal(t, want, end.StatusCode, end.Err)
			if how != "delete" {
				require.Equal(t, map[string]int{"signal": 128 + 15, "close": 128 + 9}[how], *end.Metadata.Return)
			}
			deadline := time.Now().Add(2 * time.Second)
			for {
				b, err := os.ReadFile("/proc/" + pid + "/stat")
				if err != nil || strings.Contains(string(b), ") Z ") {
					break
				}
				require.True(t, time.Now().Before(deadline), fmt.Sprintf("process %s still runs", pid))
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
