package main

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseResponse feeds Porkbun's answers, well-formed or not, to the parser: it never
// panics, a SUCCESS is the only nil error, and an ERROR's message is bounded and valid
// UTF-8 when the input is.
func FuzzParseResponse(f *testing.F) {
	f.Add(200, []byte(`{"status":"SUCCESS","response":{"avail":"yes","price":"9.73","additional":{"renewal":{"price":"10.81"},"transfer":{"price":"9.73"}}}}`))
	f.Add(400, []byte(`{"status":"ERROR","message":"Invalid API key. (002)"}`))
	f.Add(429, []byte(`{"status":"ERROR","code":"RATE_LIMIT_EXCEEDED","message":"Rate limit exceeded"}`))
	f.Add(502, []byte(`<html>502 Bad Gateway</html>`))
	f.Add(200, []byte(`{"status":"SUCCESS","domains":[{"domain":"a.com","status":"ACTIVE","expireDate":"2027-01-01 00:00:00","securityLock":"1"}]}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		var list listAnswer
		err := parseResponse(status, body, &list)
		var ae *apiError
		if errors.As(err, &ae) {
			if len(ae.Message) > maxMessage+len("…") {
				t.Fatalf("message of %d bytes", len(ae.Message))
			}
			if utf8.Valid(body) && !utf8.ValidString(ae.Message) {
				t.Fatalf("message is not UTF-8: %q", ae.Message)
			}
			if strings.ContainsAny(ae.Message, "\n\r") {
				t.Fatalf("message has a line break: %q", ae.Message)
			}
		}
		if err == nil && status != http.StatusOK {
			t.Fatalf("HTTP %d parsed as a success", status)
		}
		for _, d := range list.Domains {
			_ = domainStatus(d.Status)
			_ = yes(d.SecurityLock)
			_, _ = priceMicros(d.ExpireDate)
		}
	})
}
