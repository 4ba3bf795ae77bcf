package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// lineProcess is a client program the test drives through its standard input (a line "stop" makes it
// leave its group and exit) and follows through its standard output, a line at a time: each line goes
// to handle, and a line "closed" says the program left its group.
type lineProcess struct {
	name  string
	stdin io.WriteCloser
	// done is closed once the process has exited, with exitErr its exit status.
	done    chan struct{}
	exitErr error
	// handle takes one line's fields, with mu held; it returns false for a line it does not know.
	handle func(fields []string) bool

	mu     sync.Mutex
	closed bool
	log    strings.Builder
}

// start starts cmd, whose standard output p.handle reads; its standard error and the lines handle
// does not know go to the log printed when the test fails.
func (p *lineProcess) start(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin, p.done = stdin, make(chan struct{})
	cmd.Stderr = (*processLog)(p)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.line(sc.Text())
		}
		p.exitErr = cmd.Wait()
	}()
	t.Cleanup(func() {
		// A process the test did not stop is killed with the test's context.
		_ = stdin.Close()
		<-p.done
		if t.Failed() {
			p.mu.Lock()
			t.Logf("%s log:\n%s", p.name, p.log.String())
			p.mu.Unlock()
		}
	})
}

// processLog appends a process's standard error to its log.
type processLog lineProcess

func (w *processLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log.Write(b)
	return len(b), nil
}

func (p *lineProcess) line(l string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := strings.Fields(l)
	switch {
	case len(f) == 0:
	case f[0] == "closed":
		p.closed = true
	case !p.handle(f):
		fmt.Fprintf(&p.log, "unexpected: %s\n", l)
	}
}

// stop asks the process to leave its group and waits until it has.
func (p *lineProcess) stop(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "stop\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		t.Fatalf("%s did not stop", p.name)
	}
	if p.exitErr != nil {
		t.Fatalf("%s: %v", p.name, p.exitErr)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		t.Fatalf("%s ended without leaving the group", p.name)
	}
}
