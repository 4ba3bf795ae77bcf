package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/vfs"
)

// loadSettings fills the serve flags the command line did not set, first from WEIR_<FLAG>, then
// from the --config file (which WEIR_CONFIG may name): flags win over the environment, which wins
// over the file, which wins over the defaults.
func loadSettings(flags *pflag.FlagSet) error {
	fromEnv, err := flagsFromEnv(flags)
	if err != nil {
		return err
	}
	path, err := flags.GetString("config")
	if err != nil || path == "" {
		return err
	}
	return flagsFromFile(flags, path, fromEnv)
}

// flagsFromEnv sets every flag not given on the command line from WEIR_<FLAG> (upper case, dashes as
// underscores), so `WEIR_DATA_DIR=/var/lib/weir weir serve` works like --data-dir. It returns the
// names of the flags it set.
func flagsFromEnv(flags *pflag.FlagSet) (map[string]bool, error) {
	set := map[string]bool{}
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := "WEIR_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = badValue(name, f, v, serr)
			}
			set[f.Name] = true
		}
	})
	return set, err
}

// flagsFromFile reads a config file of `key = value` lines (keys are the flag names without their
// dashes; blank lines and lines starting with # are skipped) and sets each flag that neither the
// command line nor the environment (overridden) set. Every line is checked, overridden keys too: an
// unknown key, a key given twice or a value that does not parse is one line naming the file, the line
// and the key.
func flagsFromFile(flags *pflag.FlagSet, path string, overridden map[string]bool) error {
	data, err := vfs.ReadFile(vfs.OS, path)
	if err != nil {
		return fmt.Errorf("%w: --config %s: %w", errUsage, path, pathProblem(err))
	}
	first := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		where := fmt.Sprintf("%s:%d", path, i+1)
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || key == "" {
			return fmt.Errorf("%w: %s: %q: want key = value", errUsage, where, line)
		}
		f := flags.Lookup(key)
		if f == nil || key == "config" || key == "help" {
			return fmt.Errorf("%w: %s: unknown key %q (the keys are serve's flag names, such as data-dir)", errUsage, where, key)
		}
		if line, dup := first[key]; dup {
			return fmt.Errorf("%w: %s: %s is set again (first on line %d)", errUsage, where, key, line)
		}
		first[key] = i + 1
		kept := f.Value.String()
		if err := f.Value.Set(value); err != nil {
			return badValue(where+": "+key, f, value, err)
		}
		if f.Changed || overridden[key] {
			if err := f.Value.Set(kept); err != nil {
				return fmt.Errorf("serve: --%s: restoring %q over the config file's value: %w", key, kept, err)
			}
		}
	}
	return nil
}

// badValue is the one line for a setting whose value does not parse: where it was set (--flag,
// WEIR_FLAG or file:line key), the value, and what the setting takes.
func badValue(where string, f *pflag.Flag, value string, err error) error {
	return fmt.Errorf("%w: %s %q: %s", errUsage, where, value, wantValue(f.Value.Type(), err))
}

// wantValue says what a flag of type typ takes, in place of the parser's error.
func wantValue(typ string, err error) string {
	switch {
	case errors.Is(err, strconv.ErrRange):
		return "out of range for " + typ
	case typ == "duration":
		return "want a duration such as 500ms, 6s or 1m"
	case strings.HasPrefix(typ, "int"):
		return "want an integer"
	}
	return err.Error()
}

// flagValueError rewrites a value on the command line that does not parse into badValue's line and
// leaves every other flag error as it is.
func flagValueError(err error) error {
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) {
		return badValue("--"+bad.GetFlag().Name, bad.GetFlag(), bad.GetValue(), bad.Unwrap())
	}
	return err
}

// checkDataDir makes sure the node can keep its data in dir before anything else starts: it creates
// dir when missing and creates and removes a probe file in it, so a path that is a file, or a
// directory this user cannot write, ends the start in one line naming --data-dir.
func checkDataDir(dir string) error {
	if info, err := vfs.OS.Stat(dir); err == nil && !info.IsDir() {
		return fmt.Errorf("serve: --data-dir %s: not a directory", dir)
	}
	if err := vfs.OS.MkdirAll(dir); err != nil {
		return fmt.Errorf("serve: --data-dir %s: cannot create it: %w", dir, pathProblem(err))
	}
	probe := filepath.Join(dir, ".weir-write-probe")
	f, err := vfs.OS.Create(probe)
	if err != nil {
		return fmt.Errorf("serve: --data-dir %s: not writable: %w", dir, pathProblem(err))
	}
	if err := errors.Join(f.Close(), vfs.OS.Remove(probe)); err != nil {
		return fmt.Errorf("serve: --data-dir %s: %w", dir, err)
	}
	return nil
}

// pathProblem is the cause of a filesystem error without the operation and path, which the caller
// names itself.
func pathProblem(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// listenError names the flag whose address a listener could not bind, in one line such as
// "serve: --kafka-addr 127.0.0.1:9092: address already in use"; any other error is returned as it is.
func listenError(cfg server.Config, err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "listen" {
		return err
	}
	bound, ok := op.Addr.(*net.TCPAddr)
	if !ok {
		return err
	}
	problem := op.Err
	var sys *os.SyscallError
	if errors.As(problem, &sys) {
		problem = sys.Err
	}
	var samePort error
	for _, l := range []struct{ flag, addr string }{
		{"--kafka-addr", cfg.KafkaAddr}, {"--http-addr", cfg.HTTPAddr}, {"--controller-addr", cfg.ControllerAddr},
	} {
		want, rerr := net.ResolveTCPAddr("tcp", l.addr)
		if rerr != nil || want.Port != bound.Port {
			continue
		}
		named := fmt.Errorf("serve: %s %s: %w", l.flag, l.addr, problem)
		if want.IP.Equal(bound.IP) {
			return named
		}
		samePort = named
	}
	if samePort != nil {
		return samePort
	}
	return err
}
