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
