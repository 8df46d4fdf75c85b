package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fedhost/fedhost/sdk"
	"github.com/fedhost/fedhost/sdk/resource"
)

// maxExecOutput bounds what the driver reads of one recorded output stream.
const maxExecOutput = 4 << 20

// stdinRunner opens the pushed stdin file, removes it, and runs the command with it as
// standard input, so the input is never in the command line or the operation's record.
const stdinRunner = `f="$1"; shift; exec <"$f" || exit 126; rm -f "$f"; exec "$@"`

// execMetadata is the metadata of a finished exec operation (doc/rest-api.md,
// "POST /1.0/instances/<name>/exec" with record-output).
type execMetadata struct {
	Return *int              `json:"return"`
	Output map[string]string `json:"output"`
}

// Exec runs a command through POST /1.0/instances/<name>/exec with its output recorded:
// the output is sent after the command ends, one chunk per stream.
func (p *provider) Exec(ctx context.Context, req resource.ExecRequest, output func(resource.ExecOutput) error) (resource.ExecResult, error) {
	if err := checkNames(req.Tenant, req.Instance); err != nil {
		return resource.ExecResult{}, err
	}
	if req.Binary == "" {
		return resource.ExecResult{}, sdk.Invalid("binary", "the incus driver runs a named command only: give the binary to run")
	}
	if req.TTY {
		return resource.ExecResult{}, sdk.Errorf(sdk.CodeUnsupported, "the incus driver runs commands without a terminal: leave tty off")
	}
	cfg, api, err := p.settings(ctx)
	if err != nil {
		return resource.ExecResult{}, err
	}
	name := instanceName(req.Tenant, req.Instance)
	command := append([]string{req.Binary}, req.Args...)
	stdinPath := ""
	if len(req.Stdin) > 0 {
		b := make([]byte, 12)
		rand.Read(b)
		stdinPath = "/tmp/.fedhost-stdin-" + hex.EncodeToString(b)
		if err := pushFile(ctx, api, name, stdinPath, req.Stdin, "0600", "file", fileOwner{}); err != nil {
			return resource.ExecResult{}, serverError(cfg, "pushing the command's stdin to instance "+name, err)
		}
		// Removed by the runner once opened; removed here too when the command never ran.
		defer api.call(context.WithoutCancel(ctx), http.MethodDelete, instancePath(name, "files"), url.Values{"path": {stdinPath}}, nil, nil)
		command = append([]string{"/bin/sh", "-c", stdinRunner, "sh", stdinPath}, command...)
	}
	env := map[string]string{}
	for k, v := range req.Env {
		env[k] = v
	}
	r, err := api.call(ctx, http.MethodPost, instancePath(name, "exec"), nil, map[string]any{
		"command": command, "environment": env, "cwd": cfg.NodeDir, "wait-for-websocket": false, "record-output": true, "interactive": false,
	}, nil)
	if err != nil {
		if isNotFound(err) {
			return resource.ExecResult{}, sdk.Errorf(sdk.CodeNotFound, "instance %s of node %s/%s does not exist: provision it first", name, req.Tenant, req.Instance)
		}
		return resource.ExecResult{}, serverError(cfg, "exec in instance "+name, err)
	}
	if r.Type != "async" {
		return resource.ExecResult{}, fmt.Errorf("exec in instance %s answered %s, want an operation", name, r.Type)
	}
	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	op, err := waitExec(runCtx, api, r.Operation)
	if err != nil {
		if runCtx.Err() == nil {
			return resource.ExecResult{}, serverError(cfg, "exec in instance "+name, err)
		}
		// Incus's answer to the cancel: see the README ("Exec").
		cerr := api.do(context.WithoutCancel(ctx), http.MethodDelete, "/1.0/operations/"+r.Operation, nil, nil)
		if ctx.Err() != nil {
			return resource.ExecResult{}, ctx.Err()
		}
		res := resource.ExecResult{ExitCode: -1, TimedOut: true, Status: "timed out after " + req.Timeout.String()}
		if cerr != nil {
			res.Status += "; the server refused the cancel: " + bounded(cerr.Error())
		}
		return res, nil
	}
	var md execMetadata
	if err := json.Unmarshal(op.Metadata, &md); err != nil || md.Return == nil {
		return resource.ExecResult{}, fmt.Errorf("exec in instance %s: the operation's metadata has no return status", name)
	}
	for _, s := range []struct{ fd, stream string }{{"1", "stdout"}, {"2", "stderr"}} {
		p := md.Output[s.fd]
		if p == "" {
			continue
		}
		prefix := instancePath(name, "logs") + "/"
		if !strings.HasPrefix(p, prefix) || strings.Contains(p, "..") {
			return resource.ExecResult{}, fmt.Errorf("exec in instance %s: the recorded %s is not a log of the instance", name, s.stream)
		}
		data, err := api.raw(ctx, p)
		if err != nil {
			return resource.ExecResult{}, serverError(cfg, "reading the recorded "+s.stream+" of instance "+name, err)
		}
		api.call(ctx, http.MethodDelete, p, nil, nil, nil)
		if len(data) > 0 {
			if err := output(resource.ExecOutput{Stream: s.stream, Data: data}); err != nil {
				return resource.ExecResult{}, err
			}
		}
	}
	return resource.ExecResult{ExitCode: *md.Return, Status: fmt.Sprintf("exited with status %d", *md.Return)}, nil
}

// waitExec waits for an exec operation to end and returns it; a failed operation is an
// error, a command's non-zero status is not.
func waitExec(ctx context.Context, api *apiClient, id string) (operation, error) {
	for {
		var op operation
		if err := api.get(ctx, "/1.0/operations/"+id+"/wait", url.Values{"timeout": {"30"}}, &op); err != nil {
			return op, err
		}
		switch op.StatusCode {
		case opSuccess:
			return op, nil
		case opFailure, opCancelled:
			return op, &apiError{Code: op.StatusCode, Message: bounded(op.Err)}
		}
		if err := ctx.Err(); err != nil {
			return op, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// raw reads a file the API serves as is (an instance log), bounded.
func (c *apiClient) raw(ctx context.Context, p string) ([]byte, error) {
	u := c.base + p
	if c.project != "" {
		u += "?" + url.Values{"project": {c.project}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxExecOutput))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		if _, perr := parseResponse(resp.StatusCode, data); perr != nil {
			return nil, perr
		}
		return nil, &apiError{Code: resp.StatusCode, Message: "HTTP " + resp.Status}
	}
	return bytes.Clone(data), nil
}

var _ resource.Executor = (*provider)(nil)
