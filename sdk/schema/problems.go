package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Problem is one thing wrong with a document: the JSON pointer of the value it concerns
// and what is wrong, in words made from the schema's titles. A missing property is at the
// property's own pointer, not at its parent's. A message never quotes the value.
type Problem struct {
	Location string `json:"location"`
	Message  string `json:"message"`
}

// maxLocation bounds a pointer in a problem: property names come from the document.
const maxLocation = 512

// Check validates raw against s and lists every problem, sorted by location; none when
// raw is valid.
func Check(s *jsonschema.Schema, raw json.RawMessage) []Problem {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return []Problem{{Location: "", Message: "The document is not JSON: send a JSON object"}}
	}
	return Problems(s, s.Validate(v))
}

// Problems turns a validation error of s into its problems, each at the deepest place it
// concerns; nil for a nil error.
func Problems(s *jsonschema.Schema, err error) []Problem {
	if err == nil {
		return nil
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []Problem{{Message: err.Error()}}
	}
	n := namer{root: s}
	var out []Problem
	seen := map[Problem]bool{}
	add := func(loc []string, msg string) {
		p := Problem{Location: pointer(loc), Message: msg}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch k := e.ErrorKind.(type) {
		case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
			if len(e.Causes) > 0 {
				for _, c := range e.Causes {
					walk(c)
				}
				return
			}
		case *kind.Required:
			for _, name := range k.Missing {
				loc := append(append([]string{}, e.InstanceLocation...), name)
				add(loc, n.name(loc)+" is required: fill it in")
			}
			return
		case *kind.DependentRequired:
			for _, name := range k.Missing {
				loc := append(append([]string{}, e.InstanceLocation...), name)
				add(loc, n.name(loc)+" is required when "+n.name(append(append([]string{}, e.InstanceLocation...), k.Prop))+" is set")
			}
			return
		case *kind.PropertyNames:
			// The causes judge the name itself (their location is empty): the problem sits
			// at the entry, and says what its name must be.
			loc := append(append([]string{}, e.InstanceLocation...), k.Property)
			why := "is not allowed here"
			if len(e.Causes) > 0 {
				why = describe(deepest(e.Causes[0]).ErrorKind)
			}
			add(loc, "The name of this entry "+why+": rename it")
			return
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				loc := append(append([]string{}, e.InstanceLocation...), name)
				add(loc, "This is not a known option here: remove it")
			}
			return
		}
		add(e.InstanceLocation, n.name(e.InstanceLocation)+" "+describe(e.ErrorKind))
	}
	walk(verr)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Location < out[j].Location })
	return out
}

// deepest follows the first cause down to the error that says what is wrong.
func deepest(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		e = e.Causes[0]
	}
	return e
}

// pointer writes instance location tokens as a JSON pointer, cut to maxLocation bytes.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	p := b.String()
	if len(p) > maxLocation {
		cut := maxLocation
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		p = p[:cut] + "…"
	}
	return p
}

// namer names the value at an instance location by the title of its schema, found by
// following properties and items from the root, or by its property name made readable.
type namer struct{ root *jsonschema.Schema }

func (n namer) name(loc []string) string {
	if len(loc) == 0 {
		return "The document"
	}
	cur := n.root
	for _, tok := range loc {
		if cur != nil {
			cur = child(cur, tok)
		}
	}
	if t := title(cur); t != "" {
		return capitalize(t)
	}
	last := loc[len(loc)-1]
	if i, err := strconv.Atoi(last); err == nil && i >= 0 {
		return "Item " + strconv.Itoa(i+1) + " of " + lower(n.name(loc[:len(loc)-1]))
	}
	return humanize(last)
}

// child is the schema of the value tok inside a value of s, or nil.
func child(s *jsonschema.Schema, tok string) *jsonschema.Schema {
	for depth := 0; s != nil && depth < 32; depth++ {
		if p, ok := s.Properties[tok]; ok {
			return p
		}
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 {
			if i < len(s.PrefixItems) {
				return s.PrefixItems[i]
			}
			if s.Items2020 != nil {
				return s.Items2020
			}
		}
		s = s.Ref
	}
	return nil
}

// title is the title of s, or of what its $ref names.
func title(s *jsonschema.Schema) string {
	for depth := 0; s != nil && depth < 32; depth++ {
		if s.Title != "" {
			return s.Title
		}
		s = s.Ref
	}
	return ""
}

// humanize makes a property name readable: pollingFrequency and polling_frequency are
// "Polling frequency".
func humanize(key string) string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = nil
		}
	}
	rs := []rune(key)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == ' ' || r == '.':
			flush()
		case unicode.IsUpper(r) && len(cur) > 0 && (unicode.IsLower(cur[len(cur)-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	if len(words) == 0 {
		return "This value"
	}
	s := strings.Join(words, " ")
	if len(s) > 64 {
		return "This value"
	}
	return capitalize(s)
}

func capitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:]
}

func lower(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[size:]
}

var typeWords = map[string]string{
	"integer": "a whole number", "number": "a number", "string": "text", "boolean": "yes or no",
	"array": "a list", "object": "a group of settings", "null": "empty",
}

var formatWords = map[string]string{
	"email": "an e-mail address", "idn-email": "an e-mail address", "hostname": "a host name",
	"idn-hostname": "a host name", "uri": "a URL such as https://example.org/", "uri-reference": "a URL",
	"iri": "a URL", "url": "a URL", "ipv4": "an IPv4 address", "ipv6": "an IPv6 address",
	"date-time": "a date and time such as 2026-12-01T09:30:00Z", "date": "a date such as 2026-12-01",
	"time": "a time such as 09:30:00Z", "duration": "a duration such as P1D", "uuid": "a UUID",
	"regex": "a regular expression", "json-pointer": "a JSON pointer",
}

// describe says what is wrong without the value: the library's own texts quote the value
// for patterns, formats and bounds, and a value may be a secret an operator typed.
func describe(k jsonschema.ErrorKind) string {
	rat := func(r *big.Rat) string { f, _ := r.Float64(); return strconv.FormatFloat(f, 'g', -1, 64) }
	plural := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.Itoa(n) + " " + many
	}
	switch k := k.(type) {
	case *kind.Pattern:
		return fmt.Sprintf("is not in the expected form (the pattern %s)", k.Want)
	case *kind.Format:
		if w, ok := formatWords[k.Want]; ok {
			return "must be " + w
		}
		return "must be a valid " + k.Want
	case *kind.Minimum:
		return "must be at least " + rat(k.Want)
	case *kind.Maximum:
		return "must be at most " + rat(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be more than " + rat(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be less than " + rat(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + rat(k.Want)
	case *kind.MinLength:
		return "must be at least " + plural(k.Want, "character", "characters")
	case *kind.MaxLength:
		return "must be at most " + plural(k.Want, "character", "characters")
	case *kind.MinItems:
		return "needs at least " + plural(k.Want, "item", "items")
	case *kind.MaxItems:
		return "takes at most " + plural(k.Want, "item", "items")
	case *kind.MinProperties:
		return "needs at least " + plural(k.Want, "entry", "entries")
	case *kind.MaxProperties:
		return "takes at most " + plural(k.Want, "entry", "entries")
	case *kind.UniqueItems:
		return fmt.Sprintf("has the same item twice (items %d and %d): remove one", k.Duplicates[0]+1, k.Duplicates[1]+1)
	case *kind.Enum:
		return "must be one of the choices: " + choices(k.Want)
	case *kind.Const:
		return "must be " + choices([]any{k.Want})
	case *kind.ContentMediaType:
		return "is not of media type " + k.Want
	case *kind.ContentEncoding:
		return "is not encoded as " + k.Want
	case *kind.Type:
		words := make([]string, len(k.Want))
		for i, w := range k.Want {
			if words[i] = typeWords[w]; words[i] == "" {
				words[i] = w
			}
		}
		return "must be " + strings.Join(words, " or ")
	case *kind.AnyOf, *kind.OneOf:
		return "matches none of the forms it may take"
	case *kind.Not:
		return "is a value that is not allowed here"
	case *kind.FalseSchema:
		return "is not allowed here: remove it"
	case *kind.Contains, *kind.MinContains, *kind.MaxContains:
		return "lacks an item it must contain"
	}
	return "is not valid here"
}

// choices lists schema values (never the document's) for a message.
func choices(vs []any) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		if s, ok := v.(string); ok {
			parts = append(parts, s)
			continue
		}
		b, _ := json.Marshal(v)
		parts = append(parts, string(b))
	}
	if len(parts) > 12 {
		parts = append(parts[:12], "…")
	}
	return strings.Join(parts, ", ")
}
