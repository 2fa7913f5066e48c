package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/dbt"
)

func (a *app) importCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Print datasets from another tool's description as refill.yaml text",
	}
	cmd.AddCommand(a.importDBTCmd())
	return cmd
}

func (a *app) importDBTCmd() *cobra.Command {
	var opts dbt.Options
	cmd := &cobra.Command{
		Use:   "dbt MANIFEST [--project-dir DIR] [--env NAME]...",
		Short: "Print a dbt project's models, seeds, snapshots and sources as a datasets: block",
		Long: `Read a dbt manifest (target/manifest.json, written by dbt parse, compile or
build) and print its models, seeds, snapshots and sources as refill.yaml's
datasets: block, exactly as datasets_from: {dbt_manifest: MANIFEST} would
import them; a summary of what was imported, and why some datasets are
lineage only, goes to stderr. With -o json, the datasets are printed as JSON.

A model with a partition column (meta.refill.partition, config.event_time or
config.partition_by) is rebuilt by a command job running dbt build for it; a
view, an ephemeral model and a model without a partition column are lineage
only: shown in the lineage, counted for the tier, never rebuilt.`,
		Args: wrapArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The jobs seal the dbt project they run from, named
			// relative to where refill.yaml is (the working directory).
			base, err := os.Getwd()
			if err != nil {
				return err
			}
			project := ""
			proj, err := dbt.FindProject(args[0], opts.ProjectDir, base)
			if err == nil {
				project, err = filepath.Rel(base, proj)
			}
			if err != nil {
				fmt.Fprintf(a.stderr, "note: the jobs' dbt_project: is left out, so refill.yaml will refuse them until they name the dbt project they run from: %v\n", err)
			}
			imp, ds, err := config.ImportDBT(args[0], opts, filepath.ToSlash(project))
			if err != nil {
				return err
			}
			for _, s := range dbt.Summarize(byName(ds)) {
				fmt.Fprintln(a.stderr, s)
			}
			if a.output == "json" {
				return a.printJSON(map[string]any{"datasets": byName(ds)})
			}
			if err := imp.WriteYAML(a.stdout); err != nil {
				return fmt.Errorf("writing the datasets: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ProjectDir, "project-dir", "", "the dbt project's directory, passed to dbt as --project-dir (relative to refill.yaml)")
	f.StringArrayVar(&opts.Env, "env", nil, "an environment variable the dbt jobs need besides "+fmt.Sprint(dbt.DefaultEnv)+": NAME or NAME=value (repeat for more)")
	return cmd
}

func byName(ds []*refill.Dataset) map[string]*refill.Dataset {
	out := make(map[string]*refill.Dataset, len(ds))
	for _, d := range ds {
		out[d.Name] = d
	}
	return out
}
