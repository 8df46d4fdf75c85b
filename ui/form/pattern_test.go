package form

import "testing"

// Browsers compile the pattern attribute with the v flag and ignore a pattern that does
// not compile there, so a JSON Schema pattern must be adapted, not copied.
func TestHTMLPattern(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`^[A-Za-z0-9_.@-]{1,64}$`, `^[A-Za-z0-9_.@\-]{1,64}$`},
		{`^[-a]$`, `^[\-a]$`},
		{`^[^-a]$`, `^[^\-a]$`},
		{`^[a-z]{2,3}(-[A-Z]{2})?$`, `^[a-z]{2,3}(-[A-Z]{2})?$`},
		{`^[\]\-(]$`, `^[\]\-\(]$`},
		{`^[a|b/c{}]$`, `^[a\|b\/c\{\}]$`},
		{`^$|^[^@\s]+@[^@\s]+\.[^@\s]+$`, `^$|^[^@\s]+@[^@\s]+\.[^@\s]+$`},
	}
	for _, tt := range tests {
		if got := htmlPattern(tt.in); got != tt.want {
			t.Errorf("htmlPattern(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEncodeIDIsOneToOne(t *testing.T) {
	t.Parallel()
	ptrs := []string{"", "/a", "/a/b", "/a-b", "/a.2Db", "/a~1b", "/a~0b", "/a b", "/a_b", "/a/", "/a//help"}
	seen := map[string]string{}
	for _, p := range ptrs {
		id := encodeID(p)
		if other, ok := seen[id]; ok {
			t.Errorf("%q and %q both encode to %q", p, other, id)
		}
		seen[id] = p
	}
}
