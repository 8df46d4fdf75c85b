package scheduler

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/fedhost/fedhost/sdk/app"
)

// Change is what moving an app from one version to another does.
type Change string

// The changes a version step can make.
const (
	ChangeNone      Change = "none"      // the same version: nothing to do
	ChangeInstall   Change = "install"   // no version recorded yet: a first install
	ChangeUpgrade   Change = "upgrade"   // a newer version within the guard's step
	ChangeDowngrade Change = "downgrade" // an older version the guard lets through with a warning
)

// Verdict is the outcome of a version step the guard accepts.
type Verdict struct {
	Change Change
	// Warning is set when the step goes through but a person should know about it
	// (a downgrade under OnDowngrade warn).
	Warning string
}

// ErrStepRefused is matched (errors.Is) by every *StepError.
var ErrStepRefused = errors.New("version step refused")

// StepError is a version step the app's guard refuses: a skipped release series or
// a downgrade. The build fails before anything changes.
type StepError struct {
	From, To  string
	MaxStep   app.Step
	Downgrade bool
}

func (e *StepError) Error() string {
	if e.Downgrade {
		return fmt.Sprintf("the version guard refuses a downgrade from %s to %s: the data may already be migrated; restore a backup taken before the upgrade instead", e.From, e.To)
	}
	return fmt.Sprintf("the version guard refuses the step from %s to %s: it accepts at most %s; update through each release series in between", e.From, e.To, stepText(e.MaxStep))
}

// Is makes errors.Is(err, ErrStepRefused) true.
func (e *StepError) Is(target error) bool { return target == ErrStepRefused }

func stepText(s app.Step) string {
	switch s {
	case app.StepMajor:
		return "one major version up (x.*.* to x+1.*.*)"
	case app.StepMinor:
		return "one minor version up within a major version (x.y.* to x.y+1.*); patch releases are free"
	}
	return string(s)
}

// CheckStep decides whether an app at version from may move to version to under the
// guard of the version being installed (guard.Version is that version; to may be ""
// to mean it). from "" is a first install. An empty MaxStep accepts any step, and an
// empty OnDowngrade refuses: an app that says nothing keeps its data safe.
// A refused step is a *StepError; a version that does not parse is a plain error.
func CheckStep(guard app.VersionGuard, from, to string) (Verdict, error) {
	if to == "" {
		to = guard.Version
	}
	if guard.Version != "" && guard.Version != to {
		return Verdict{}, fmt.Errorf("the version guard is for version %s, not %s: read the guard of the version being installed", guard.Version, to)
	}
	vt, err := parseVersion(to)
	if err != nil {
		return Verdict{}, err
	}
	if from == "" {
		return Verdict{Change: ChangeInstall}, nil
	}
	vf, err := parseVersion(from)
	if err != nil {
		return Verdict{}, err
	}
	switch c := vt.compare(vf); {
	case c == 0:
		return Verdict{Change: ChangeNone}, nil
	case c < 0:
		switch guard.OnDowngrade {
		case app.DowngradeWarn:
			return Verdict{Change: ChangeDowngrade, Warning: fmt.Sprintf("downgrade from %s to %s: the app accepts it, but data migrated by %s may not work with %s", from, to, from, to)}, nil
		case app.DowngradeRefuse, "":
			return Verdict{}, &StepError{From: from, To: to, MaxStep: guard.MaxStep, Downgrade: true}
		default:
			return Verdict{}, fmt.Errorf("the version guard's on-downgrade %q is not refuse or warn", guard.OnDowngrade)
		}
	}
	var within bool
	switch guard.MaxStep {
	case app.StepAny, "":
		within = true
	case app.StepMajor:
		within = vt.major-vf.major <= 1
	case app.StepMinor:
		within = vt.major == vf.major && vt.minor-vf.minor <= 1
	default:
		return Verdict{}, fmt.Errorf("the version guard's max step %q is not any, major or minor", guard.MaxStep)
	}
	if !within {
		return Verdict{}, &StepError{From: from, To: to, MaxStep: guard.MaxStep}
	}
	return Verdict{Change: ChangeUpgrade}, nil
}

// version is a semantic version; a missing minor or patch is 0 ("2.3" is 2.3.0) and
// a leading "v" is allowed, as app versions are written both ways.
type version struct {
	major, minor, patch int
	pre                 []string // pre-release identifiers; build metadata is dropped
}

func parseVersion(s string) (version, error) {
	bad := func(why string) (version, error) {
		return version{}, fmt.Errorf("version %q is not a semantic version (MAJOR.MINOR.PATCH): %s", s, why)
	}
	core, _, _ := strings.Cut(strings.TrimPrefix(s, "v"), "+")
	core, pre, hasPre := strings.Cut(core, "-")
	parts := strings.Split(core, ".")
	if len(parts) > 3 {
		return bad("more than three numbers")
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil {
			return bad(fmt.Sprintf("%q is not a number", p))
		}
		n[i] = v
	}
	v := version{major: n[0], minor: n[1], patch: n[2]}
	if hasPre {
		if pre == "" {
			return bad("empty pre-release")
		}
		v.pre = strings.Split(pre, ".")
	}
	return v, nil
}

// compare orders versions by semantic version precedence: -1, 0 or 1.
func (v version) compare(w version) int {
	for _, d := range [...]int{v.major - w.major, v.minor - w.minor, v.patch - w.patch} {
		if d != 0 {
			return sign(d)
		}
	}
	switch {
	case len(v.pre) == 0 && len(w.pre) == 0:
		return 0
	case len(v.pre) == 0:
		return 1 // a release is above its pre-releases
	case len(w.pre) == 0:
		return -1
	}
	for i := 0; i < len(v.pre) && i < len(w.pre); i++ {
		a, b := v.pre[i], w.pre[i]
		na, errA := strconv.Atoi(a)
		nb, errB := strconv.Atoi(b)
		switch {
		case errA == nil && errB == nil:
			if na != nb {
				return sign(na - nb)
			}
		case errA == nil:
			return -1 // numeric identifiers sort below alphanumeric ones
		case errB == nil:
			return 1
		case a != b:
			return strings.Compare(a, b)
		}
	}
	return sign(len(v.pre) - len(w.pre))
}

func sign(d int) int {
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// CompareVersions orders two semantic versions (a missing minor or patch is 0, a leading
// v allowed): -1, 0 or 1. It fails, naming the version, when one is not a semantic version.
func CompareVersions(a, b string) (int, error) {
	va, err := parseVersion(a)
	if err != nil {
		return 0, err
	}
	vb, err := parseVersion(b)
	if err != nil {
		return 0, err
	}
	return va.compare(vb), nil
}
