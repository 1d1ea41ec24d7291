package policy

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/tokens"
)

// textSubject is a result of text parts.
func textSubject(texts ...string) *Subject {
	var parts []Part
	for _, t := range texts {
		parts = append(parts, Part{Kind: KindText, Size: TextSize(t)})
	}
	return NewSubject("t", "r", 1, parts, func() string { return strings.Join(texts, "") })
}

func TestOverTokens(t *testing.T) {
	o200k, err := tokens.NewExact(tokens.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	words := strings.TrimSpace(strings.Repeat("hello world ", 100)) // 200 tokens of o200k_base, 1,199 characters
	if n := o200k.CountText(words); n != 200 {
		t.Fatalf("o200k_base counts %d tokens, the test wants 200", n)
	}
	for _, tc := range []struct {
		p    OverTokens
		s    *Subject
		want bool
	}{
		{OverTokens{Max: 200, Counter: o200k}, textSubject(words), false},
		{OverTokens{Max: 199, Counter: o200k}, textSubject(words), true},
		{OverTokens{Max: 199, Counter: o200k}, textSubject(words[:600], words[600:]), true},
		// Approximate: 1,199 characters are 299 tokens.
		{OverTokens{Max: 299}, textSubject(words), false},
		{OverTokens{Max: 298}, textSubject(words), true},
		{OverTokens{Max: 0}, textSubject(""), false},
		// Under Max bytes: never counted, never over.
		{OverTokens{Max: 1199, Counter: o200k}, textSubject(words), false},
	} {
		if got := tc.p.ShouldOffload(tc.s); got != tc.want {
			t.Errorf("%v on %q… = %v, want %v", tc.p, tc.s.Content()[:min(20, len(tc.s.Content()))], got, tc.want)
		}
	}
}

// TestSubjectTokens: the text parts counted, without the base64 of the
// binary ones beside them, which are charged by the piece.
func TestSubjectTokens(t *testing.T) {
	img := base64.StdEncoding.EncodeToString(make([]byte, 3000))
	parts := []Part{
		{Kind: KindText, Size: 8},
		{Kind: KindImage, Size: len(img)},
		{Kind: KindText, Size: 4},
		{Kind: KindFile, Size: len(img)},
	}
	s := NewSubject("t", "r", 1, parts, func() string { return "abcdéfgh" + img + "ijkl" + img })
	if got := s.texts(); got != "abcdéfghijkl" {
		t.Errorf("texts() = %q, want the text parts only", got)
	}
	if got, want := SubjectTokens(s, nil, -1), 12/4+TokensPerImage+TokensPerFile; got != want {
		t.Errorf("SubjectTokens = %d, want %d", got, want)
	}
	// A counter that makes more tokens than bytes is always asked.
	dense := tokens.Approximate{CharsPerToken: 0.5}
	if got, want := SubjectTokens(textSubject("abcd"), dense, 100), 8; got != want {
		t.Errorf("SubjectTokens with 0.5 characters a token = %d, want %d", got, want)
	}
}

func TestOverTokensConfig(t *testing.T) {
	o200k, _ := tokens.NewExact(tokens.O200kBase)
	for _, p := range []Policy{OverTokens{Max: 2000, Counter: o200k}, OverTokens{Max: 5}} {
		b, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if back.(OverTokens).Max != p.(OverTokens).Max || counterName(back.(OverTokens).Counter) != counterName(p.(OverTokens).Counter) {
			t.Errorf("%s loads as %v, want %v", b, back, p)
		}
	}
	if _, err := Marshal(OverTokens{Max: 5, Counter: tokens.Approximate{CharsPerToken: 3}}); err == nil || !strings.Contains(err.Error(), "cannot be saved") {
		t.Errorf("saving an approximate counter of 3 characters a token: %v, want an error", err)
	}
	b, _ := Marshal(OverTokens{Max: 2000, Counter: o200k})
	if want := `{"type":"toolcas.policy.OverTokens","init_parameters":{"threshold":2000,"counter":"o200k_base"}}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	for in, want := range map[string]string{
		`{"type":"toolcas.policy.OverTokens","init_parameters":{}}`:                                    "no threshold",
		`{"type":"toolcas.policy.OverTokens","init_parameters":{"threshold":-1}}`:                      "threshold -1",
		`{"type":"toolcas.policy.OverTokens","init_parameters":{"threshold":5,"counter":"gpt2"}}`:      `"gpt2"`,
		`{"type":"toolcas.policy.OverTokens","init_parameters":{"threshold":5,"tokens":"o200k_base"}}`: "tokens",
	} {
		_, err := Unmarshal([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Unmarshal(%s) = %v, want an error naming %s", in, err, want)
		}
	}
	if _, err := Unmarshal([]byte(`{"type":"toolcas.policy.OverTokens","init_parameters":{"threshold":5,"counter":"gpt2"}}`)); !errors.Is(err, tokens.ErrUnknownEncoding) {
		t.Errorf("an unknown counter: %v, want ErrUnknownEncoding", err)
	}
}
