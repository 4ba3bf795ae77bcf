//go:build !linux

package main

import (
	"errors"
	"os"
)

// echoOff fails: prompting without echo is built for Linux only; elsewhere the password comes from
// --password-stdin.
func echoOff(*os.File) (func(), error) {
	return nil, errors.New("weir: no password prompt on this system")
}
