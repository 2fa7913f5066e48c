package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is the binary's version: set at link time
// (-ldflags "-X github.com/refill-dev/refill/internal/cli.Version=v1.2.3"),
// else the module's version from the build info, else "dev".
var Version = "dev"

// BuildInfo is what `refill version` says of the binary, from the build
// information Go records in it.
type BuildInfo struct {
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	// Modified says the binary was built from a tree with changes not
	// committed.
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Module   string `json:"module"`
}

// Build reads the binary's build information.
func Build() BuildInfo {
	b := BuildInfo{Version: Version}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Go, b.Module = info.GoVersion, info.Main.Path
	if b.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line of refill --version.
func (b BuildInfo) String() string {
	s := "refill " + b.Version
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (" + c
		if b.Modified {
			s += ", modified"
		}
		if b.CommitTime != "" {
			s += ", " + b.CommitTime
		}
		s += ")"
	}
	if b.Go != "" {
		s += " " + b.Go
	}
	return s
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "The binary's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := Build()
			if a.json() {
				return a.printJSON(b)
			}
			fmt.Fprintln(a.stdout, b.String())
			return nil
		},
	}
}
