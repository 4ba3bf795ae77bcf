package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are set at link time by scripts/release (-X main.version=... -X main.commit=...);
// left empty, they come from the build information Go records in the binary (the module version
// under go install, the VCS revision when built from a checkout).
var (
	version string
	commit  string
)

// buildVersion is what `weir version` reports.
type buildVersion struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Modified is set when the binary was built from a checkout with uncommitted changes.
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// currentVersion reads the binary's build information and applies the link-time overrides.
func currentVersion() buildVersion {
	v := buildVersion{Version: "(devel)", Commit: "unknown", Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" {
			v.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		v.Version = version
	}
	if commit != "" {
		v.Commit = commit
	}
	return v
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print weir's version, the commit it was built from and the Go version that built it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			modified := ""
			if v.Modified {
				modified = ", modified"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "weir %s (commit %s%s, %s, %s)\n", v.Version, v.Commit, modified, v.Go, v.Platform)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the version as JSON")
	return cmd
}
