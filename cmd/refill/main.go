// Command refill is a control plane for data backfills: it decides how far
// each backfill can be trusted to run on its own, and enforces it.
package main

import (
	"os"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/cli"
	"github.com/refill-dev/refill/internal/secret"
)

func main() {
	// Before anything else: refill's secrets leave its environment, where
	// every command job could read them (/proc/PID/environ).
	secret.Keep(func() (string, []refill.Secret) { return cli.Secrets(os.Args[1:]) })
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
