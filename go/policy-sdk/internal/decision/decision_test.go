package decision

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	policy "podset.dev/policy-sdk"
)

func convert(in []int) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, v := range in {
		if v == 99 {
			panic("ninety-nine")
		}
		if v < 0 {
			return nil, policy.Errorf("InvalidAction", "%d is negative", v)
		}
		out = append(out, strconv.Itoa(v))
	}
	return out, nil
}

func TestWhatADecisionEndsInIsItsPolicyError(t *testing.T) {
	for name, c := range map[string]struct {
		decide func() ([]int, error)
		want   *Failure
	}{
		"actions":             {func() ([]int, error) { return []int{1, 2}, nil }, nil},
		"a policy error":      {func() ([]int, error) { return nil, policy.Errorf("InvalidSize", "-1") }, &Failure{"InvalidSize", "-1"}},
		"one wrapped":         {func() ([]int, error) { return nil, fmt.Errorf("reading: %w", policy.Errorf("Bad", "b")) }, &Failure{"Bad", "b"}},
		"another error":       {func() ([]int, error) { return nil, errors.New("boom") }, &Failure{"Error", "boom"}},
		"a panic":             {func() ([]int, error) { panic("at the disco") }, &Failure{"Panic", "at the disco"}},
		"a conversion's":      {func() ([]int, error) { return []int{-3}, nil }, &Failure{"InvalidAction", "-3 is negative"}},
		"a conversion panics": {func() ([]int, error) { return []int{99}, nil }, &Failure{"Panic", "ninety-nine"}},
	} {
		out, failure := Run(c.decide, convert)
		if (failure == nil) != (c.want == nil) || (failure != nil && *failure != *c.want) {
			t.Errorf("%s: failure %+v, want %+v", name, failure, c.want)
		}
		if failure == nil && len(out) == 0 {
			t.Errorf("%s: no actions", name)
		}
	}
}
