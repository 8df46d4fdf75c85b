package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// eventPoll is how often a stream looks for new events of a running build.
const eventPoll = 200 * time.Millisecond

// ProgressEvent is the data of one "progress" event of a build's stream.
type ProgressEvent struct {
	Seq      int       `json:"seq"`
	Time     time.Time `json:"time"`
	Step     string    `json:"step"`
	Level    string    `json:"level"`
	Message  string    `json:"message"`
	Progress int       `json:"progress"`
	State    string    `json:"state"`
	// StartedAt is when the build started running; absent while it is queued.
	StartedAt *time.Time `json:"started_at,omitempty"`
}

// EndEvent is the data of the last SSE event of a build's stream.
type EndEvent struct {
	State      string     `json:"state"`
	Reason     string     `json:"reason"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// buildEvents streams a build's log as Server-Sent Events, from after the Last-Event-ID
// a reconnecting browser sends (or ?after=N), and ends with an "end" event.
func (h *handlers) buildEvents(c *fiber.Ctx) error {
	id := c.Params("id")
	// ?after=N says where a first connection starts; a browser's reconnect says where it
	// stopped with Last-Event-ID, which wins.
	after, err := queryInt(c, "after", 0, 0, math.MaxInt)
	if err != nil {
		return err
	}
	if id, err := strconv.Atoi(c.Get("Last-Event-ID")); err == nil {
		after = id
	}
	st := h.d.Store
	if _, err := st.GetBuild(c.UserContext(), id); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	ctx := context.WithoutCancel(c.UserContext())
	// A stream outlives the server's write timeout: each write gets that much time
	// anew, so a stream that flows stays open and one whose reader stopped is cut.
	conn, writeTimeout := c.Context().Conn(), c.App().Config().WriteTimeout
	extend := func() {
		if writeTimeout > 0 {
			_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		}
	}
	c.Context().SetBodyStreamWriter(fasthttp.StreamWriter(func(w *bufio.Writer) {
		last := after
		for {
			extend()
			b, err := st.GetBuild(ctx, id)
			if err != nil {
				return
			}
			events, err := st.BuildEvents(ctx, id)
			if err != nil {
				return
			}
			for _, e := range events {
				if e.Seq <= last {
					continue
				}
				data, _ := json.Marshal(ProgressEvent{Seq: e.Seq, Time: e.Time, Step: e.Step, Level: e.Level, Message: e.Message, Progress: e.Progress, State: string(b.State), StartedAt: b.StartedAt})
				fmt.Fprintf(w, "id: %d\nevent: progress\ndata: %s\n\n", e.Seq, data)
				last = e.Seq
			}
			if b.State.Finished() {
				data, _ := json.Marshal(EndEvent{State: string(b.State), Reason: b.Reason, StartedAt: b.StartedAt, FinishedAt: b.FinishedAt})
				fmt.Fprintf(w, "event: end\ndata: %s\n\n", data)
				_ = w.Flush()
				return
			}
			// A comment keeps proxies from closing an idle stream, and tells a closed one.
			fmt.Fprint(w, ": waiting\n\n")
			if err := w.Flush(); err != nil {
				return
			}
			time.Sleep(eventPoll)
		}
	}))
	return nil
}
