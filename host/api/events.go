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
	after, err := resumeAfter(c)
	if err != nil {
		return err
	}
	st := h.d.Store
	if _, err := st.GetBuild(c.UserContext(), id); err != nil {
		return err
	}
	return streamEvents(c, after, eventPoll, func(ctx context.Context, w *bufio.Writer, last int) (int, bool) {
		b, err := st.GetBuild(ctx, id)
		if err != nil {
			return last, true
		}
		events, err := st.BuildEvents(ctx, id)
		if err != nil {
			return last, true
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
			return last, true
		}
		return last, false
	})
}

// resumeAfter is where a stream starts: ?after=N for a first connection, or the
// Last-Event-ID a browser's reconnect says it stopped at, which wins.
func resumeAfter(c *fiber.Ctx) (int, error) {
	after, err := queryInt(c, "after", 0, 0, math.MaxInt)
	if err != nil {
		return 0, err
	}
	if id, err := strconv.Atoi(c.Get("Last-Event-ID")); err == nil {
		after = id
	}
	return after, nil
}

// streamEvents answers with Server-Sent Events: each round, write sends what is new after
// last and says whether the stream ends; between rounds a comment keeps proxies from
// closing an idle stream (and tells a closed one), then it waits poll. A stream outlives
// the server's write timeout: each round gets that much time anew, so a stream that flows
// stays open and one whose reader stopped is cut.
func streamEvents(c *fiber.Ctx, after int, poll time.Duration, write func(ctx context.Context, w *bufio.Writer, last int) (int, bool)) error {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	ctx := context.WithoutCancel(c.UserContext())
	conn, writeTimeout := c.Context().Conn(), c.App().Config().WriteTimeout
	c.Context().SetBodyStreamWriter(fasthttp.StreamWriter(func(w *bufio.Writer) {
		last := after
		for {
			if writeTimeout > 0 {
				_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			}
			var done bool
			if last, done = write(ctx, w, last); done {
				_ = w.Flush()
				return
			}
			fmt.Fprint(w, ": waiting\n\n")
			if err := w.Flush(); err != nil {
				return
			}
			time.Sleep(poll)
		}
	}))
	return nil
}
