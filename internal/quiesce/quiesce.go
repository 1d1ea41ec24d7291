// Package quiesce waits for what a store does in the background, which
// no user of the library needs to see: the temp files a store makes ahead
// of its writes. A benchmark that times one write at a time waits between
// them, so that the work behind one write does not run while the next is
// timed.
package quiesce

import (
	"reflect"
	"sync"
)

// waits holds the wait of each type that registered one.
var waits sync.Map // reflect.Type → func(any)

// Register sets how Wait waits for a value of type T; the package that
// defines T calls it from its init.
func Register[T any](wait func(T)) {
	waits.Store(reflect.TypeFor[T](), func(v any) { wait(v.(T)) })
}

// Wait waits until v's background work is done. A value whose type
// registered no wait has none to wait for.
func Wait(v any) {
	if w, ok := waits.Load(reflect.TypeOf(v)); ok {
		w.(func(any))(v)
	}
}
