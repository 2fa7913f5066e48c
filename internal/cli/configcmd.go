package cli

import (
	"github.com/spf13/cobra"

	"github.com/refill-dev/refill/config"
)

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "refill.yaml itself"}
	cmd.AddCommand(&cobra.Command{
		Use:   "schema",
		Short: "Print refill.yaml's JSON Schema, for editors",
		Long: `Print the JSON Schema (2020-12) of refill.yaml: every key, its type, and no
others. Save it beside refill.yaml and start the file with

  # yaml-language-server: $schema=./refill.schema.json

and editors that speak the YAML language server complete and check it. What
a schema cannot say (a table that exists, an upstream that is a dataset) the
loader says, with the line.`,
		Example: `  refill config schema > refill.schema.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := config.Schema()
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(append(b, '\n'))
			return err
		},
	})
	return cmd
}
