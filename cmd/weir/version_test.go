package main

import (
	"runtime"
	"strings"
	"testing"
)

func TestVersionReportsBuild(t *testing.T) {
	var v buildVersion
	decodeJSON(t, mustRun(t, "", "version", "--json"), &v)
	if v.Go != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Version == "" || v.Commit == "" {
		t.Fatalf("version --json = %+v, want this binary's Go version and platform and a version and commit", v)
	}
	if out := mustRun(t, "", "version"); !strings.HasPrefix(out, "weir "+v.Version+" (commit "+v.Commit) {
		t.Fatalf("version = %q, want it to start with weir %s (commit %s", out, v.Version, v.Commit)
	}
}

// TestVersionLinkTimeOverride checks that what scripts/release sets with -X main.version and -X
// main.commit wins over the build information.
func TestVersionLinkTimeOverride(t *testing.T) {
	oldVersion, oldCommit := version, commit
	t.Cleanup(func() { version, commit = oldVersion, oldCommit })
	version, commit = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	out := mustRun(t, "", "version")
	if !strings.HasPrefix(out, "weir v1.2.3 (commit 0123456789abcdef0123456789abcdef01234567") {
		t.Fatalf("version = %q, want the link-time version and commit", out)
	}
}
