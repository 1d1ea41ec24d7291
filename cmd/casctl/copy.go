package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/store"
)

type copyOptions struct {
	from, to           string
	fromIndex, toIndex string
	init, json         bool
}

func newCopyCommand(g *globals) *cobra.Command {
	var o copyOptions
	cmd := &cobra.Command{
		Use:   "copy --from SRC --to DST",
		Short: "Copy every part and blob of a store into another, and verify",
		Long: `copy copies every part of the store SRC (every version of every key of
every run, with its key, version, time and type) and every blob they use
into the store DST, then checks that every part of SRC resolves in DST,
the same, and that every blob reads back whole from DST. SRC is only read.

DST must exist (casctl init) unless --init makes it. What DST holds already
stays: a part it holds the same is skipped, so copy run again copies only
what is missing, and a copy that was stopped resumes where it was. A DST
that holds other content under a key and version of SRC is refused before
anything is written, naming the key.

Each store keeps its index where it was created with (--from-index and
--to-index name a PostgreSQL index, as --index does for other commands):
copy moves a store from SQLite to PostgreSQL and back.`,
		Example: `  casctl copy --from tool_results --to /mnt/shared/tool_results --init
  casctl copy --from tool_results --to shared --init \
      --to-index postgres://toolcas@db:5432/toolcas
  casctl copy --from shared --to tool_results --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.from == "" || o.to == "" {
				return usagef("copy needs --from SRC and --to DST")
			}
			if g.store != "" || g.index != "" {
				return usagef("copy takes --from and --to (and --from-index, --to-index), not --store or --index")
			}
			return runCopy(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "the store to copy from")
	f.StringVar(&o.to, "to", "", "the store to copy into")
	f.StringVar(&o.fromIndex, "from-index", "", "SRC's index URL, postgres://USER@HOST:PORT/DB (default: the one SRC records)")
	f.StringVar(&o.toIndex, "to-index", "", "DST's index URL (default: the one DST records; with --init, where DST's index goes)")
	f.BoolVar(&o.init, "init", false, "create DST when it does not exist")
	f.BoolVar(&o.json, "json", false, "print JSON")
	for _, name := range []string{"from", "to"} {
		cmd.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		})
	}
	return cmd
}

type copyJSON struct {
	From          string `json:"from"`
	To            string `json:"to"`
	Parts         int64  `json:"parts"`
	PartsCopied   int64  `json:"parts_copied"`
	PartsSkipped  int64  `json:"parts_skipped"`
	BlobsCopied   int64  `json:"blobs_copied"`
	BlobsSkipped  int64  `json:"blobs_skipped"`
	BytesCopied   int64  `json:"bytes_copied"`
	PartsVerified int64  `json:"parts_verified"`
	BlobsVerified int64  `json:"blobs_verified"`
}

func runCopy(ctx context.Context, g *globals, o copyOptions) error {
	src, err := openCopySource(ctx, o.from, o.fromIndex)
	if err != nil {
		return fail("copy", err)
	}
	defer src.Close()
	dst, err := openCopyDest(ctx, o.to, o.toIndex, o.init)
	if err != nil {
		return fail("copy", err)
	}
	defer dst.Close()

	var (
		bar   *progressbar.ProgressBar
		stage store.CopyStage
	)
	opts := store.CopyOptions{Progress: func(p store.CopyProgress) {
		if p.Stage == store.CopyChecking {
			return // quick, and the total is not known yet
		}
		if p.Stage != stage {
			if bar != nil {
				bar.Finish()
			}
			stage = p.Stage
			bar = progress(g.stderr, o.json, p.Total, "copy: "+string(p.Stage)+" parts", false)
		}
		if bar != nil {
			bar.Set64(p.Done)
		}
	}}
	res, err := store.Copy(ctx, dst, src, opts)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return fail("copy", err)
	}
	if o.json {
		return writeJSON(g.stdout, copyJSON{From: src.Dir(), To: dst.Dir(), Parts: res.Parts,
			PartsCopied: res.PartsCopied, PartsSkipped: res.PartsSkipped, BlobsCopied: res.BlobsCopied,
			BlobsSkipped: res.BlobsSkipped, BytesCopied: res.BytesCopied, PartsVerified: res.PartsVerified,
			BlobsVerified: res.BlobsVerified})
	}
	if res.PartsCopied == 0 && res.BlobsCopied == 0 {
		fmt.Fprintf(g.stdout, "nothing to copy: %s already holds all %s of %s\n", dst.Dir(), count(int(res.Parts), "part"), src.Dir())
	} else {
		fmt.Fprintf(g.stdout, "copied %s and %s (%s) from %s to %s; %s and %s were there already\n",
			count(int(res.PartsCopied), "part"), count(int(res.BlobsCopied), "blob"), size(res.BytesCopied), src.Dir(), dst.Dir(),
			count(int(res.PartsSkipped), "part"), count(int(res.BlobsSkipped), "blob"))
	}
	fmt.Fprintf(g.stdout, "verified: %s, %s read back whole\n", count(int(res.PartsVerified), "part"), count(int(res.BlobsVerified), "blob"))
	return nil
}

// openCopySource opens the store copy reads: read-only, unless its index
// needs migrating first.
func openCopySource(ctx context.Context, dir, indexURL string) (*store.Store, error) {
	if !store.Exists(dir) {
		return nil, errNoStore(dir, "--from names the store to copy")
	}
	var opts []store.Option
	if indexURL != "" {
		opts = append(opts, store.WithIndexURL(indexURL))
	}
	s, err := store.Open(ctx, dir, append(opts, store.ReadOnly())...)
	if errors.Is(err, index.ErrOlderSchema) {
		s, err = store.Open(ctx, dir, opts...)
	}
	if err != nil {
		return nil, cleanErr(err)
	}
	return s, nil
}

// openCopyDest opens the store copy writes to, making it with init.
func openCopyDest(ctx context.Context, dir, indexURL string, init bool) (*store.Store, error) {
	var opts []store.Option
	if indexURL != "" {
		opts = append(opts, store.WithIndexURL(indexURL))
	}
	if !store.Exists(dir) {
		if !init {
			hint := "create it with casctl --store " + dir + " init"
			if indexURL != "" {
				hint += " --index URL"
			}
			return nil, errNoStore(dir, hint+", or add --init")
		}
		if err := checkEmptyDir(dir); err != nil {
			return nil, err
		}
		opts = append(opts, store.WithCreate())
	} else if init && indexURL != "" {
		// As init does: a store whose first init could not reach its
		// database gets it now.
		opts = append(opts, store.WithCreate())
	}
	if err := writeAccess(dir); err != nil {
		return nil, err
	}
	s, err := store.Open(ctx, dir, opts...)
	if err != nil {
		return nil, cleanErr(err)
	}
	return s, nil
}
