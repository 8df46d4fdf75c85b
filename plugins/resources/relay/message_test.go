package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const own = "noreply@acme.example"

func TestCheckSenders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		msg  string
		ok   bool
	}{
		{"plain", "From: noreply@acme.example\r\nTo: a@b.test\r\n\r\nbody\r\n", true},
		{"display name and case", "From: \"Acme\" <NoReply@Acme.Example>\r\n\r\nbody", true},
		{"encoded display name", "From: =?utf-8?q?Acme_=C3=A9?= <noreply@acme.example>\r\n\r\n", true},
		{"folded", "From: Acme\r\n <noreply@acme.example>\r\n\r\n", true},
		{"own sender and return-path", "From: noreply@acme.example\r\nSender: noreply@acme.example\r\nReturn-Path: <noreply@acme.example>\r\n\r\n", true},
		{"no from", "To: a@b.test\r\n\r\nbody", false},
		{"other from", "From: ceo@acme.example\r\n\r\n", false},
		{"two addresses", "From: noreply@acme.example, ceo@beta.example\r\n\r\n", false},
		{"two headers", "From: noreply@acme.example\r\nFrom: ceo@beta.example\r\n\r\n", false},
		{"other sender", "From: noreply@acme.example\r\nSender: ceo@beta.example\r\n\r\n", false},
		{"other return-path", "From: noreply@acme.example\r\nReturn-Path: <ceo@beta.example>\r\n\r\n", false},
		{"group of the one address", "From: team: noreply@acme.example;\r\n\r\n", true},
		{"no header end", "From noreply@acme.example", false},
		{"address in comment", "From: ceo@beta.example (noreply@acme.example)\r\n\r\n", false},
	} {
		err := checkSenders([]byte(c.msg), own)
		if c.ok {
			require.NoError(t, err, c.name)
		} else {
			require.Error(t, err, c.name)
			require.NotContains(t, err.Error(), "beta", "%s: the error repeats no address", c.name)
		}
	}
}

// FuzzCheckSenders feeds the header check messages from outside: it never panics, and a
// message it lets through has a header with an address in it, and an account address.
func FuzzCheckSenders(f *testing.F) {
	f.Add([]byte("From: noreply@acme.example\r\nTo: a@b.test\r\n\r\nbody\r\n"), own)
	f.Add([]byte("From: \"x\" <noreply@acme.example>\r\nSender: noreply@acme.example\r\n\r\n"), own)
	f.Add([]byte("From: a@b, c@d\r\n\r\n"), "a@b")
	f.Fuzz(func(t *testing.T, msg []byte, from string) {
		if checkSenders(msg, from) != nil {
			return
		}
		if !strings.Contains(from, "@") {
			t.Fatalf("a message passed for an account address without @")
		}
		if !bytes.Contains(msg, []byte("@")) && !bytes.Contains(msg, []byte("=?")) {
			t.Fatalf("a message passed whose header holds no address")
		}
	})
}
