// Package policy decides which tool results are offloaded: Always, Never,
// OverChars, and Strategies, which picks a policy per tool the way
// Haystack's offload_strategies does (exact name, then the first group
// naming the tool, then "*").
//
// Start at Strategies: a map from a tool name (or a group of them, or "*")
// to a Policy, handed to hook.New.
package policy

import (
	"encoding/base64"
	"fmt"
	"sync"
	"unicode/utf8"
)

// Kinds of part a Subject describes.
const (
	KindText  = "text"
	KindImage = "image"
	KindFile  = "file"
)

// Part describes one part of a tool result to a policy.
type Part struct {
	Kind     string // KindText, KindImage or KindFile
	MIME     string
	Filename string
	// Size is what the part adds to the result's size: code points of text,
	// the base64 length of a binary payload.
	Size int
}

// Subject is one tool result as a policy sees it, with the run's live
// state: what Haystack passes a policy as tool_name, result and state.
type Subject struct {
	Tool string
	Run  string
	// Step is the number of the step that produced the result.
	Step int
	// State is the run's live state as the framework adapter exposes it,
	// or nil when it exposes none.
	State State
	// Parts describes each part in order.
	Parts []Part
	// Size is the length of the result as one string, counted as Haystack
	// counts it: every part's text or base64 payload, concatenated without a
	// separator, in Unicode code points.
	Size int

	once    sync.Once
	content func() string
	str     string
}

// NewSubject returns a Subject whose Content calls content, once, when a
// policy first asks for it.
func NewSubject(tool, run string, step int, parts []Part, content func() string) *Subject {
	s := &Subject{Tool: tool, Run: run, Step: step, Parts: parts, content: content}
	for _, p := range parts {
		s.Size += p.Size
	}
	return s
}

// Content returns the result as one string: every part's text or base64
// payload, concatenated. It is built on first use; policies that only need
// the size should use Size.
func (s *Subject) Content() string {
	s.once.Do(func() {
		if s.content != nil {
			s.str = s.content()
		}
	})
	return s.str
}

// TextSize returns the size a text part adds: its code points, counted as
// utf8.RuneCountInString counts them, with a fast path over ASCII, which
// most tool output is.
func TextSize(text string) int {
	n, i := 0, 0
	for ; i+8 <= len(text); i += 8 {
		w := uint64(text[i]) | uint64(text[i+1])<<8 | uint64(text[i+2])<<16 | uint64(text[i+3])<<24 |
			uint64(text[i+4])<<32 | uint64(text[i+5])<<40 | uint64(text[i+6])<<48 | uint64(text[i+7])<<56
		if w&0x8080808080808080 != 0 {
			break
		}
		n += 8
	}
	return n + utf8.RuneCountInString(text[i:])
}

// BinarySize returns the size a binary payload of n bytes adds: the length of
// its standard, padded base64 encoding.
func BinarySize(n int) int { return base64.StdEncoding.EncodedLen(n) }

// A Policy decides whether a tool result is offloaded. Implementations must
// be safe for concurrent use. A custom policy that should be saved in
// configuration also implements Configurable and is registered with
// Register.
type Policy interface {
	ShouldOffload(s *Subject) bool
}

// Fixed is a policy whose answer never changes.
type Fixed bool

// The fixed policies: Haystack's AlwaysOffload and NeverOffload.
const (
	Always Fixed = true
	Never  Fixed = false
)

// ShouldOffload returns f.
func (f Fixed) ShouldOffload(*Subject) bool { return bool(f) }

// String returns "Always" or "Never".
func (f Fixed) String() string {
	if f {
		return "Always"
	}
	return "Never"
}

// OverChars offloads a result whose size is strictly greater than the
// threshold: Haystack's OffloadOverChars.
type OverChars int

// ShouldOffload reports whether s.Size > o.
func (o OverChars) ShouldOffload(s *Subject) bool { return s.Size > int(o) }

// Func adapts a function to a Policy. It cannot be saved as configuration.
type Func func(*Subject) bool

// ShouldOffload calls f.
func (f Func) ShouldOffload(s *Subject) bool { return f(s) }

// String returns "OverChars(n)".
func (o OverChars) String() string { return fmt.Sprintf("OverChars(%d)", int(o)) }
