package store

import "time"

// Options only tests use.

// withFaults makes the named points of gc, and "write:record" (a row
// commit), fail with what inject returns.
func withFaults(inject func(point string) error) Option {
	return func(c *config) error {
		c.inject = inject
		return nil
	}
}

// withoutGCLock turns gc.lock off, to show what it prevents.
func withoutGCLock() Option {
	return func(c *config) error {
		c.noLock = true
		return nil
	}
}

// withoutIntent makes gc skip gc.intent, to show the starvation it prevents.
func withoutIntent() Option {
	return func(c *config) error {
		c.noIntent = true
		return nil
	}
}

// withSweepWindow sets how long gc may delete a batch's objects under the
// sweep fence, for tests that wait for a fence to pass.
func withSweepWindow(d time.Duration) Option {
	return func(c *config) error {
		c.sweepWindow = d
		return nil
	}
}
