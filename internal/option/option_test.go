package option

import "testing"

type config struct{ n int }

func TestSet(t *testing.T) {
	var c config
	if err := Set(func(c *config) { c.n = 3 })(&c); err != nil || c.n != 3 {
		t.Errorf("Set: n = %d, err %v; want 3, nil", c.n, err)
	}
}

func TestCheck(t *testing.T) {
	for _, n := range []int{-1, 0, 5} {
		c := config{n: 7}
		err := Check(n > 0, func(c *config) { c.n = n }, "count %d: want a positive number", n)(&c)
		switch {
		case n > 0 && (err != nil || c.n != n):
			t.Errorf("Check(%d): n = %d, err %v; want %d, nil", n, c.n, err, n)
		case n <= 0 && (err == nil || c.n != 7):
			t.Errorf("Check(%d): n = %d, err %v; want 7 (untouched) and an error", n, c.n, err)
		case n == -1 && err.Error() != "count -1: want a positive number":
			t.Errorf("Check(-1) error %q, want %q", err, "count -1: want a positive number")
		}
	}
}
