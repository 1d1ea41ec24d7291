package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

type vacuumOptions struct{ json bool }

func newVacuumCommand(g *globals) *cobra.Command {
	var o vacuumOptions
	cmd := &cobra.Command{
		Use:   "vacuum",
		Short: "Rewrite the index database so that each table's rows lie together",
		Long: `vacuum rewrites the store's index database (SQLite's VACUUM): each table
and each of its indexes comes out in the order of its keys, in pages side by
side, and free pages go back to the file system. Rows written over months lie
scattered between those of every other table; reads of many rows, as grep
makes on a large store, touch far fewer of the file's pages afterwards. Run it
now and then after pack, when few agents write: writers wait while it runs
(seconds for an index of tens of megabytes), readers go on. It needs free
space for a copy of the index. An index in PostgreSQL is kept by PostgreSQL's
autovacuum: vacuum refuses it.`,
		Example: `  casctl pack && casctl vacuum
  casctl vacuum --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVacuum(cmd.Context(), g, o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

type vacuumJSON struct {
	BeforeBytes int64   `json:"before_bytes"`
	AfterBytes  int64   `json:"after_bytes"`
	FreeBytes   int64   `json:"free_bytes"`
	Seconds     float64 `json:"seconds"`
}

func runVacuum(ctx context.Context, g *globals, o vacuumOptions) error {
	s, err := g.open(ctx)
	if err != nil {
		return fail("vacuum", err)
	}
	defer s.Close()
	start := time.Now()
	res, err := s.VacuumIndex(ctx)
	if err != nil {
		return fail("vacuum", err)
	}
	took := time.Since(start)
	if o.json {
		return writeJSON(g.stdout, vacuumJSON{res.Before, res.After, res.Free, took.Seconds()})
	}
	freed := ""
	if res.Free > 0 {
		freed = fmt.Sprintf(", %s of free pages given back", size(res.Free))
	}
	fmt.Fprintf(g.stdout, "vacuumed the index: %s before, %s after%s, in %v\n",
		size(res.Before), size(res.After), freed, took.Round(time.Millisecond))
	return nil
}
