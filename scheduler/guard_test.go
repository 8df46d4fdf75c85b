package scheduler

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fedhost/fedhost/sdk/app"
)

func TestCheckStep(t *testing.T) {
	t.Parallel()
	minor := app.VersionGuard{MaxStep: app.StepMinor, OnDowngrade: app.DowngradeRefuse}
	major := app.VersionGuard{MaxStep: app.StepMajor, OnDowngrade: app.DowngradeRefuse}
	anyStep := app.VersionGuard{MaxStep: app.StepAny, OnDowngrade: app.DowngradeWarn}
	for _, tc := range []struct {
		name     string
		guard    app.VersionGuard
		from, to string
		want     Change
		refused  []string // substrings of the refusal; nil: accepted
	}{
		{name: "patch releases are free under minor", guard: minor, from: "2.3.5", to: "2.3.9", want: ChangeUpgrade},
		{name: "one minor up", guard: minor, from: "2.3", to: "2.4", want: ChangeUpgrade},
		{name: "one minor up from a patch release", guard: minor, from: "2.3.9", to: "2.4.2", want: ChangeUpgrade},
		{name: "two minors up refused, naming both", guard: minor, from: "2.3", to: "2.5", refused: []string{"2.3", "2.5", "one minor version up"}},
		{name: "next major refused under minor", guard: minor, from: "2.9.1", to: "3.0.0", refused: []string{"2.9.1", "3.0.0", "within a major version"}},
		{name: "next major accepted under major", guard: major, from: "2.9.1", to: "3.0.0", want: ChangeUpgrade},
		{name: "next major with its minors under major", guard: major, from: "2.3.0", to: "3.4.1", want: ChangeUpgrade},
		{name: "two majors up refused under major", guard: major, from: "2.3.0", to: "4.0.0", refused: []string{"2.3.0", "4.0.0", "one major version up"}},
		{name: "any step under any", guard: anyStep, from: "1.0.0", to: "7.2.0", want: ChangeUpgrade},
		{name: "no max step is any", guard: app.VersionGuard{}, from: "1.0.0", to: "7.2.0", want: ChangeUpgrade},
		{name: "downgrade refused", guard: minor, from: "2.4.0", to: "2.3.9", refused: []string{"downgrade", "2.4.0", "2.3.9"}},
		{name: "downgrade refused when the guard says nothing", guard: app.VersionGuard{}, from: "2.4.0", to: "2.3.9", refused: []string{"downgrade"}},
		{name: "downgrade warned", guard: anyStep, from: "2.4.0", to: "2.3.9", want: ChangeDowngrade},
		{name: "equal versions: nothing to do", guard: minor, from: "2.3.5", to: "2.3.5", want: ChangeNone},
		{name: "equal with a v and a missing patch", guard: minor, from: "v2.3", to: "2.3.0", want: ChangeNone},
		{name: "build metadata ignored", guard: minor, from: "2.3.5+1", to: "2.3.5+2", want: ChangeNone},
		{name: "release above its pre-release", guard: minor, from: "2.4.0-rc.1", to: "2.4.0", want: ChangeUpgrade},
		{name: "pre-release below its release is a downgrade", guard: minor, from: "2.4.0", to: "2.4.0-rc.1", refused: []string{"downgrade"}},
		{name: "pre-releases ordered numerically", guard: minor, from: "2.4.0-rc.2", to: "2.4.0-rc.10", want: ChangeUpgrade},
		{name: "first install", guard: minor, from: "", to: "2.3.5", want: ChangeInstall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := CheckStep(tc.guard, tc.from, tc.to)
			if tc.refused != nil {
				require.ErrorIs(t, err, ErrStepRefused)
				var se *StepError
				require.True(t, errors.As(err, &se))
				for _, s := range tc.refused {
					require.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, v.Change)
			require.Equal(t, tc.want == ChangeDowngrade, v.Warning != "", "a warning comes with a let-through downgrade only: %q", v.Warning)
		})
	}
}

func TestCheckStepUsesTheGuardsVersion(t *testing.T) {
	t.Parallel()
	g := app.VersionGuard{Version: "2.5.0", MaxStep: app.StepMinor}

	_, err := CheckStep(g, "2.3.0", "")
	require.ErrorContains(t, err, "from 2.3.0 to 2.5.0")

	_, err = CheckStep(g, "2.4.0", "2.4.1")
	require.ErrorContains(t, err, "guard is for version 2.5.0, not 2.4.1")
	require.NotErrorIs(t, err, ErrStepRefused)
}

func TestCheckStepBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		guard    app.VersionGuard
		from, to string
		want     string
	}{
		{name: "from not a version", from: "latest", to: "2.3.0", want: `version "latest" is not a semantic version`},
		{name: "to not a version", from: "2.3.0", to: "2.x", want: `version "2.x" is not a semantic version`},
		{name: "four numbers", from: "2.3.0.1", to: "2.3.1", want: "more than three numbers"},
		{name: "empty pre-release", from: "2.3.0-", to: "2.3.1", want: "empty pre-release"},
		{name: "unknown step", guard: app.VersionGuard{MaxStep: "patch"}, from: "2.3.0", to: "2.3.1", want: `max step "patch"`},
		{name: "unknown downgrade", guard: app.VersionGuard{OnDowngrade: "allow"}, from: "2.3.1", to: "2.3.0", want: `on-downgrade "allow"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := CheckStep(tc.guard, tc.from, tc.to)
			require.ErrorContains(t, err, tc.want)
			require.NotErrorIs(t, err, ErrStepRefused)
		})
	}
}
