package store

import "github.com/toolcas/toolcas/index"

// testHooks lets this package's tests change a store's work: fail or hold
// it at named points, see each engine Open makes (to swap a lock or a
// lease for one that shows what it prevents), and decide what the machine
// would. It is nil outside the tests, so that each point costs one
// comparison, and no production struct carries a field for tests.
var testHooks interface {
	// opened sees the engine Open made from c, before Open returns.
	opened(c *config, e engine)
	// fault returns the error to fail with at point, or nil; it may also
	// block, to hold a store there.
	fault(e engine, point string) error
	// barrierCheap, when set is true, says what localEngine.barrierCheap
	// answers instead of the machine.
	barrierCheap(e engine) (cheap, set bool)
	// count sees n of what happened in e's work: "commit:batch" (a
	// transaction of n writes), "commit:handed" (a write handed to the
	// committer), "group:barrier" (a barrier for the group's writes),
	// "write:early" (a write's statements run beside its blob).
	count(e engine, what string, n int)
	// rowsCommitted sees the parts of a write without syncs once the
	// transaction that holds their rows committed.
	rowsCommitted(e engine, parts []index.NewPart)
	// packLimit, when positive, is the most blob bytes one pack of e's
	// takes, in place of PackLimit.
	packLimit(e engine) int64
}

// fault returns the error a test injects at a named point of e's work,
// or nil.
func fault(e engine, point string) error {
	if testHooks == nil {
		return nil
	}
	return testHooks.fault(e, point)
}

// count tells a test that n of what happened in e's work.
func count(e engine, what string, n int) {
	if testHooks != nil {
		testHooks.count(e, what, n)
	}
}

// rowsCommitted tells a test that the rows of parts, written without
// syncs, are committed.
func rowsCommitted(e engine, parts []index.NewPart) {
	if testHooks != nil {
		testHooks.rowsCommitted(e, parts)
	}
}

// packLimit returns the most blob bytes one pack of e's takes: PackLimit,
// or less when a test asks for many small packs.
func packLimit(e engine) int64 {
	if testHooks != nil {
		if n := testHooks.packLimit(e); n > 0 {
			return n
		}
	}
	return PackLimit
}
