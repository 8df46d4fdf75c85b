package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestScheduleGivesJobsTheInjectedTime(t *testing.T) {
	t.Parallel()
	fake := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	s := New(WithClock(ClockFunc(func() time.Time { return fake })))
	got := make(chan time.Time, 1)
	require.NoError(t, s.Schedule("@every 1s", func(now time.Time) {
		select {
		case got <- now:
		default:
		}
	}))
	s.Start()
	s.Start()
	require.True(t, s.Started())
	t.Cleanup(func() { _ = s.Stop(context.Background()) })

	select {
	case now := <-got:
		require.Equal(t, fake, now)
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not run within 5 s on an @every 1s schedule")
	}
}

func TestStopIsIdempotentAndWaits(t *testing.T) {
	t.Parallel()
	s := New()
	require.NoError(t, s.Stop(context.Background()), "stopping a scheduler that never started")

	running, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Schedule("@every 1s", func(time.Time) {
		select {
		case running <- struct{}{}:
			<-release
		default:
		}
	}))
	s.Start()
	<-running

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Stop(ctx), context.DeadlineExceeded, "Stop waits for the running job")
	require.False(t, s.Started())
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, s.Stop(ctx2), context.DeadlineExceeded, "a second Stop waits for the same job")

	close(release)
	require.NoError(t, s.Stop(context.Background()))
	require.NoError(t, s.Stop(context.Background()))
}

type panicLog struct{ panics chan struct{} }

func (l panicLog) Info(string, ...any) {}
func (l panicLog) Error(error, string, ...any) {
	select {
	case l.panics <- struct{}{}:
	default:
	}
}

func TestAPanickingJobDoesNotStopTheScheduler(t *testing.T) {
	t.Parallel()
	log := panicLog{panics: make(chan struct{}, 1)}
	s := New(WithLogger(log))
	ran := make(chan struct{}, 1)
	require.NoError(t, s.Schedule("@every 1s", func(time.Time) { panic("boom") }))
	require.NoError(t, s.Schedule("@every 1s", func(time.Time) {
		select {
		case ran <- struct{}{}:
		default:
		}
	}))
	s.Start()
	t.Cleanup(func() { _ = s.Stop(context.Background()) })

	for _, ch := range []chan struct{}{log.panics, ran} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("the panic was not logged, or the other job did not run, within 5 s")
		}
	}
}
