// Package clock is the wall clock. Domain packages take time through Clock interfaces of their own (Now,
// and After where they wait) so that tests drive them with fake clocks; System is what a real node passes.
// This package imports only the standard library.
package clock

import "time"

// System reads the operating system's clock.
type System struct{}

// Now is time.Now.
func (System) Now() time.Time { return time.Now() }

// After is time.After.
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }
