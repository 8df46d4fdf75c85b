package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/fedhost/fedhost/sdk"
)

// conn is the SSH connection to one machine, dialled when first needed and again after
// it breaks.
type conn struct {
	mu     sync.Mutex
	client *ssh.Client
}

// hostKeyCheck refuses any host key but m's pinned one, showing both fingerprints.
func hostKeyCheck(m *machine) ssh.HostKeyCallback {
	return func(_ string, _ net.Addr, key ssh.PublicKey) error {
		if bytes.Equal(key.Marshal(), m.key.Marshal()) {
			return nil
		}
		return &hostKeyError{machine: m.Name, address: m.Address, got: ssh.FingerprintSHA256(key), pinned: ssh.FingerprintSHA256(m.key)}
	}
}

type hostKeyError struct{ machine, address, got, pinned string }

func (e *hostKeyError) Error() string {
	return fmt.Sprintf("machine %q (%s) presented host key %s, which is not the pinned host_key %s: the driver does not connect. If the machine's host key was changed on purpose, check the new fingerprint on the machine itself (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) and put its public key in settings machines[].host_key; otherwise something else answers at that address", e.machine, e.address, e.got, e.pinned)
}

// hostKeyAlgorithms offers only the pinned key's algorithms, so that a server with
// several host keys shows the pinned one. An RSA key signs with SHA-2 (RFC 8332) or,
// from old servers, SHA-1.
func hostKeyAlgorithms(key ssh.PublicKey) []string {
	if key.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{key.Type()}
}

// dial connects to m with the settings' key, within the connect timeout.
func dial(ctx context.Context, cfg settings, m *machine) (*ssh.Client, error) {
	cc := &ssh.ClientConfig{
		User:              m.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(cfg.signer)},
		HostKeyCallback:   hostKeyCheck(m),
		HostKeyAlgorithms: hostKeyAlgorithms(m.key),
		Timeout:           cfg.connectTimeout,
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", m.Address)
	if err != nil {
		return nil, sdk.Unavailable("machine %q (%s) cannot be reached: %v", m.Name, m.Address, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	c, chans, reqs, err := ssh.NewClientConn(raw, m.Address, cc)
	if err != nil {
		raw.Close()
		var hk *hostKeyError
		if errors.As(err, &hk) {
			return nil, sdk.Errorf(sdk.CodeConflict, "%s", hk.Error())
		}
		return nil, sdk.Unavailable("machine %q (%s): SSH login as %q failed: %v: check settings machines[].user and that the public key of private_key_file is in that user's authorized_keys", m.Name, m.Address, m.User, err)
	}
	_ = raw.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// run runs script with sh on m and returns its stdout; a failure gives the end of its
// stderr. The script goes over the session's stdin (sh -s), never on a command line,
// where the machine's other users could read it: it may hold a node's files.
func (p *provider) run(ctx context.Context, cfg settings, m *machine, script string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		client, err := p.client(ctx, cfg, m)
		if err != nil {
			return nil, err
		}
		sess, err := client.NewSession()
		if err != nil {
			p.drop(m, client)
			if attempt == 0 {
				continue // the connection broke: dial again once
			}
			return nil, sdk.Unavailable("machine %q: opening an SSH session: %v", m.Name, err)
		}
		var stdout, stderr bytes.Buffer
		sess.Stdout, sess.Stderr = &limited{w: &stdout, n: 1 << 20}, &limited{w: &stderr, n: 8 << 10}
		sess.Stdin = strings.NewReader(script)
		done := make(chan error, 1)
		go func() { done <- sess.Run("sh -s") }()
		select {
		case err = <-done:
		case <-ctx.Done():
			sess.Close()
			return nil, ctx.Err()
		}
		sess.Close()
		if err != nil {
			return stdout.Bytes(), fmt.Errorf("on machine %q: %v: %s", m.Name, err, strings.TrimSpace(stderr.String()))
		}
		return stdout.Bytes(), nil
	}
}

func (p *provider) client(ctx context.Context, cfg settings, m *machine) (*ssh.Client, error) {
	p.mu.Lock()
	c, ok := p.conns[m.Name]
	if !ok {
		c = &conn{}
		p.conns[m.Name] = c
	}
	p.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		return c.client, nil
	}
	client, err := dial(ctx, cfg, m)
	if err != nil {
		return nil, err
	}
	c.client = client
	return client, nil
}

func (p *provider) drop(m *machine, client *ssh.Client) {
	p.mu.Lock()
	c := p.conns[m.Name]
	p.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.client == client {
		c.client.Close()
		c.client = nil
	}
	c.mu.Unlock()
}

func (p *provider) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.mu.Lock()
		if c.client != nil {
			c.client.Close()
			c.client = nil
		}
		c.mu.Unlock()
	}
}

// shq quotes s for a POSIX shell.
func shq(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// limited writes at most n bytes to w and drops the rest.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(b []byte) (int, error) {
	k := len(b)
	if len(b) > l.n {
		b = b[:l.n]
	}
	l.n -= len(b)
	_, err := l.w.Write(b)
	return k, err
}
