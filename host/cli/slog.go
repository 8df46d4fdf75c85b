package cli

import (
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogFrom gives River, which logs through log/slog, the host's hclog logger (the one
// go-plugin needs), so all logs share one output and format. hclog v1.6 has no bridge.
func slogFrom(l hclog.Logger) *slog.Logger {
	return slog.New(hclogHandler{l: l})
}

type hclogHandler struct {
	l      hclog.Logger
	prefix string
}

func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l >= slog.LevelError:
		return hclog.Error
	case l >= slog.LevelWarn:
		return hclog.Warn
	case l >= slog.LevelInfo:
		return hclog.Info
	}
	return hclog.Debug
}

func (h hclogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return hclogLevel(l) >= h.l.GetLevel()
}

func (h hclogHandler) Handle(_ context.Context, r slog.Record) error {
	args := make([]any, 0, 2*r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, h.prefix+a.Key, a.Value.Resolve().Any())
		return true
	})
	h.l.Log(hclogLevel(r.Level), r.Message, args...)
	return nil
}

func (h hclogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	args := make([]any, 0, 2*len(attrs))
	for _, a := range attrs {
		args = append(args, h.prefix+a.Key, a.Value.Resolve().Any())
	}
	return hclogHandler{l: h.l.With(args...), prefix: h.prefix}
}

func (h hclogHandler) WithGroup(name string) slog.Handler {
	return hclogHandler{l: h.l, prefix: h.prefix + name + "."}
}
