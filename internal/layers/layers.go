// Package layers holds the tests that keep toolcas's packages on their
// floors: the front ends (casctl, the MCP proxy and server, the framework
// adapters) reach the store only through the packages made for them; and
// the test that keeps store's functions short enough to read.
package layers
