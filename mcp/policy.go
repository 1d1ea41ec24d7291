package mcp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"crypto/rand"

	"github.com/toolcas/toolcas/policy"
)

// DefaultThreshold is the size in characters over which a result is
// offloaded when no policy is given.
const DefaultThreshold = 8000

// ErrBadOffload is returned by ParseOffload for a policy it cannot read.
var ErrBadOffload = errors.New("bad offload policy")

// ParseOffload reads offload policies written TOOL=POLICY, POLICY being
// over:N (offload when the result has more than N characters; binary
// parts count as their base64), always or never; TOOL "*" gives the policy
// of every tool without its own. With no policy for "*", other tools keep
// the default, over:8000.
func ParseOffload(specs []string) (*policy.Strategies, error) {
	var entries []policy.Entry
	wildcard := false
	for _, spec := range specs {
		tool, pol, ok := strings.Cut(spec, "=")
		tool = strings.TrimSpace(tool)
		if !ok || tool == "" {
			return nil, fmt.Errorf("%w %q: want TOOL=POLICY, as '*=over:8000' or 'web_fetch=always'", ErrBadOffload, spec)
		}
		p, err := parsePolicy(strings.TrimSpace(pol))
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrBadOffload, spec, err)
		}
		if tool == policy.Wildcard {
			wildcard = true
		}
		entries = append(entries, policy.For(tool, p))
	}
	if !wildcard {
		entries = append(entries, policy.Default(policy.OverChars(DefaultThreshold)))
	}
	s, err := policy.NewStrategies(entries...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadOffload, err)
	}
	return s, nil
}

func parsePolicy(s string) (policy.Policy, error) {
	switch s {
	case "always":
		return policy.Fixed(true), nil
	case "never":
		return policy.Fixed(false), nil
	}
	if n, ok := strings.CutPrefix(s, "over:"); ok {
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("over:%s: want a number of characters, 0 or more", n)
		}
		return policy.OverChars(v), nil
	}
	return nil, fmt.Errorf("policy %q: want over:N, always or never", s)
}

// NewRunName returns a run name for a session: the UTC date and time and a
// random suffix, 20261130-142501-3fa9c1.
func NewRunName(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%x", now.UTC().Format("20060102-150405"), b)
}
