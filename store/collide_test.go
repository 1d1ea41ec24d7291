package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

const colliders, collideRounds = 4, 15

// collideKey is writer w's call: every writer's key renders
// "cc/1_t_x_x_x_x_x.txt", split differently between tool and call id.
func collideKey(w int) hook.Key {
	return hook.Key{Run: "cc", Step: 1, Tool: "t" + strings.Repeat("_x", w),
		CallID: strings.Repeat("x_", colliders-w) + "x", Part: -1, Ext: ".txt"}
}

// collider is a child process writing its colliding call collideRounds
// times.
func collider(dir, wArg, _ string) error {
	ctx := context.Background()
	w, err := strconv.Atoi(wArg)
	if err != nil {
		return err
	}
	s, err := Open(ctx, dir)
	if err != nil {
		return err
	}
	defer s.Close()
	for r := range collideRounds {
		text := fmt.Sprintf("writer %d round %d", w, r)
		if _, err := s.Write(ctx, []hook.Item{{Key: collideKey(w), Part: hook.Text(text)}}); err != nil {
			return err
		}
	}
	return nil
}

// TestCollisionsAcrossProcesses has writer processes store calls whose
// keys render alike, all at once: the suffix is decided inside the write
// transaction, so each call ends with one key of its own (the plain key,
// ~2, ~3, …) holding exactly its versions, 1 to collideRounds.
func TestCollisionsAcrossProcesses(t *testing.T) {
	for w := 1; w < colliders; w++ {
		if collideKey(w).String() != collideKey(0).String() {
			t.Fatalf("writer %d renders %q", w, collideKey(w).String())
		}
	}
	ctx := context.Background()
	s := MustOpen(t)
	var children []interface{ Wait() error }
	for w := range colliders {
		children = append(children, startChild(t, "collider", s.Dir(), strconv.Itoa(w), ""))
	}
	for w, c := range children {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer %d: %v", w, err)
		}
	}
	parts, err := s.List(ctx, ListOptions{Run: "cc", AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != colliders*collideRounds {
		t.Fatalf("%d parts, want %d", len(parts), colliders*collideRounds)
	}
	keyOf := map[string]string{}  // call → key
	callOf := map[string]string{} // key → call
	versions := map[string][]int{}
	for _, p := range parts {
		call := p.Tool + " " + p.CallID
		if k, ok := keyOf[call]; ok && k != p.Key {
			t.Errorf("call %q stored under %q and %q", call, k, p.Key)
		}
		if c, ok := callOf[p.Key]; ok && c != call {
			t.Errorf("key %q holds calls %q and %q", p.Key, c, call)
		}
		keyOf[call], callOf[p.Key] = p.Key, call
		versions[p.Key] = append(versions[p.Key], p.Version)
	}
	for n := 1; n <= colliders; n++ {
		key := collideKey(0).Render(n)
		if len(versions[key]) != collideRounds {
			t.Errorf("key %q has %d versions, want %d (keys: %v)", key, len(versions[key]), collideRounds, callOf)
		}
		seen := map[int]bool{}
		for _, v := range versions[key] {
			seen[v] = true
		}
		for v := 1; v <= collideRounds; v++ {
			if !seen[v] {
				t.Errorf("key %q lacks version %d", key, v)
			}
		}
		c, err := s.Read(ctx, "cc", key)
		if err != nil || !strings.HasSuffix(string(c.Data), fmt.Sprintf("round %d", collideRounds-1)) {
			t.Errorf("Read(%q) = %v, %v; want a last round", key, c, err)
		}
	}
}
