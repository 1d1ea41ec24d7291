package strictjson

import "testing"

func TestDecode(t *testing.T) {
	type params struct {
		Dir string `json:"dir"`
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"dir": "x"}`, true},
		{`{"dir": "x", "durable": true}`, false}, // unknown field
		{`{"dir": "x"} {}`, false},               // trailing data
		{`{"dir": 3}`, false},
		{``, false},
	} {
		var p params
		if err := Decode([]byte(tc.in), &p); (err == nil) != tc.ok {
			t.Errorf("Decode(%q) = %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

func TestCanonical(t *testing.T) {
	classes := map[string]string{"OffloadOverChars": "toolcas.policy.OverChars"}
	for _, c := range []struct {
		in, want string
		mapped   bool
	}{
		{"haystack.components.OffloadOverChars", "toolcas.policy.OverChars", true},
		{"haystack.OffloadOverChars", "toolcas.policy.OverChars", true},
		{"haystack.components.Unknown", "haystack.components.Unknown", false},
		{"other.OffloadOverChars", "other.OffloadOverChars", false},
		{"toolcas.policy.OverChars", "toolcas.policy.OverChars", false},
		{"haystack.", "haystack.", false},
	} {
		got, mapped := Canonical(c.in, classes)
		if got != c.want || mapped != c.mapped {
			t.Errorf("Canonical(%q) = %q, %v; want %q, %v", c.in, got, mapped, c.want, c.mapped)
		}
	}
}
