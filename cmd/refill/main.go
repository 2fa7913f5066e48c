// Command refill is a control plane for data backfills: it decides how far
// each backfill can be trusted to run on its own, and enforces it.
package main

import (
	"os"

	"github.com/refill-dev/refill/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
