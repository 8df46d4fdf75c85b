package form

import (
	"html"
	"strings"
)

// attr is one attribute of an element. Values are always escaped when written; names
// are constants of this package.
type attr struct {
	name, value string
	bare        bool // a boolean attribute, written without a value
	skip        bool
}

func at(name, value string) attr { return attr{name: name, value: value} }

// atIf is an attribute written only when ok.
func atIf(name, value string, ok bool) attr { return attr{name: name, value: value, skip: !ok} }

// flag is a boolean attribute (checked, hidden, required), written only when on.
func flag(name string, on bool) attr { return attr{name: name, bare: true, skip: !on} }

// writer writes indented HTML; every text and attribute value goes through html.EscapeString.
type writer struct {
	b     strings.Builder
	depth int
}

func (w *writer) indent() {
	for range w.depth {
		w.b.WriteString("  ")
	}
}

func (w *writer) tag(name string, attrs []attr) {
	w.b.WriteString("<" + name)
	for _, a := range attrs {
		switch {
		case a.skip:
		case a.bare:
			w.b.WriteString(" " + a.name)
		default:
			w.b.WriteString(" " + a.name + `="` + html.EscapeString(a.value) + `"`)
		}
	}
	w.b.WriteString(">")
}

func (w *writer) open(name string, attrs ...attr) {
	w.indent()
	w.tag(name, attrs)
	w.b.WriteString("\n")
	w.depth++
}

func (w *writer) close(name string) {
	w.depth--
	w.indent()
	w.b.WriteString("</" + name + ">\n")
}

// void writes an element without content (input).
func (w *writer) void(name string, attrs ...attr) {
	w.indent()
	w.tag(name, attrs)
	w.b.WriteString("\n")
}

// elem writes an element with text content on one line.
func (w *writer) elem(name, text string, attrs ...attr) {
	w.indent()
	w.tag(name, attrs)
	w.b.WriteString(html.EscapeString(text) + "</" + name + ">\n")
}

// textarea writes its value after a newline, which the HTML parser drops, so that a value
// starting with a newline keeps it.
func (w *writer) textarea(value string, attrs ...attr) {
	w.indent()
	w.tag("textarea", attrs)
	w.b.WriteString("\n" + html.EscapeString(value) + "</textarea>\n")
}

// label writes a label with the required mark and the badge of a stored secret.
func (w *writer) label(forID, text string, required, secretSet bool) {
	w.indent()
	w.tag("label", []attr{at("for", forID)})
	w.b.WriteString(html.EscapeString(text))
	if required {
		w.b.WriteString(` <abbr class="field-required" title="required">*</abbr>`)
	}
	if secretSet {
		w.b.WriteString(` <span class="secret-set">set</span>`)
	}
	w.b.WriteString("</label>\n")
}

// legend is label's counterpart for a fieldset.
func (w *writer) legend(text string, required bool) {
	w.indent()
	w.b.WriteString("<legend>" + html.EscapeString(text))
	if required {
		w.b.WriteString(` <abbr class="field-required" title="required">*</abbr>`)
	}
	w.b.WriteString("</legend>\n")
}
