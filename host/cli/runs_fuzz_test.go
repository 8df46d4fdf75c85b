package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// FuzzReadRunEvents feeds the reader of a run's event stream whatever a server (or
// something posing as one) may send: it must not panic, the seq it returns never goes
// back, and an end event is returned only with a run.
func FuzzReadRunEvents(f *testing.F) {
	f.Add([]byte("id: 1\nevent: output\ndata: {\"seq\":1,\"stream\":\"stdout\",\"data\":\"hi\\n\"}\n\n: waiting\n\nevent: end\ndata: {\"id\":\"r1\",\"state\":\"succeeded\"}\n\n"))
	f.Add([]byte("id: x\nevent: output\ndata: not json\n\nevent: end\ndata: [1]\n\n"))
	f.Add([]byte("event: output\n\n\n\nid: 99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		var out, errs bytes.Buffer
		r := &remote{e: &env{stdout: &out, stderr: &errs}}
		run, after, err := r.readRunEvents(bytes.NewReader(stream), 0)
		if after < 0 {
			t.Fatalf("seq went back to %d", after)
		}
		if run != nil && err != nil {
			t.Fatalf("a run and an error: %v", err)
		}
		if run != nil && !strings.Contains(string(stream), "event: end") {
			t.Fatal("a run without an end event")
		}
		_, _ = io.Copy(io.Discard, &out)
	})
}
