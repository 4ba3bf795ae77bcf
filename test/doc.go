// Package test holds weir's process-level tests: they build the weir binary once, start real
// `weir serve` processes on free local ports with their own data directories, and drive them with
// franz-go, kcat and kafka-python, SIGKILL and SIGTERM them, tear their logs and feed them bad bytes.
// Everything lives in _test.go files; this file only names the package.
package test
