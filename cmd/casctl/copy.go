package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

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
the same, and that every blob reads back whole from DST. SRC is only read
(its index is first migrated when an older casctl made it).
SRC and DST are each a directory or a store on S3, s3://BUCKET/PREFIX
(--cache is then its local cache, as for other commands).

DST must exist (casctl init) unless --init makes it. What DST holds already
stays: a part it holds the same is skipped, so copy run again copies only
what is missing, and a copy that was stopped resumes where it was. A blob
that DST lost or holds damaged, under parts it has, is copied again from
SRC. A DST that holds other content under a key and version of SRC is
refused before anything is written, naming the key.

SRC may be written to while copy runs: copy goes over SRC again until a
pass finds nothing new to copy, and its verifying pass copies what was
written after that; what is written after copy returns, the next copy
copies.

Each store keeps its index where it was created with (--from-index and
--to-index name a PostgreSQL index, as --index does for other commands):
copy moves a store from SQLite to PostgreSQL and back, and from a
directory to S3 and back.`,
		Example: `  casctl copy --from tool_results --to /mnt/shared/tool_results --init
  casctl copy --from tool_results --to shared --init \
      --to-index postgres://toolcas@db:5432/toolcas
  casctl copy --from tool_results --to s3://team-bucket/agents --init \
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
			if g.cache != "" && !store.IsRemoteLocation(o.from) && !store.IsRemoteLocation(o.to) {
				return usagef("--cache is the local cache of a store on S3; neither %s nor %s is one", o.from, o.to)
			}
			return runCopy(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "the store to copy from: a directory or s3://BUCKET/PREFIX")
	f.StringVar(&o.to, "to", "", "the store to copy into: a directory or s3://BUCKET/PREFIX")
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
	// BlobsRepaired is left out when none was.
	BlobsRepaired int64 `json:"blobs_repaired,omitempty"`
}

func runCopy(ctx context.Context, g *globals, o copyOptions) error {
	src, err := openCopySource(ctx, o.from, o.fromIndex, g.cache)
	if err != nil {
		return fail("copy", err)
	}
	defer src.Close()
	dst, err := openCopyDest(ctx, o.to, o.toIndex, g.cache, o.init)
	if err != nil {
		return fail("copy", err)
	}
	defer dst.Close()

	var (
		bar   *progressbar.ProgressBar
		stage store.CopyStage
		done  int64
	)
	opts := store.CopyOptions{Progress: func(p store.CopyProgress) {
		if p.Stage == store.CopyChecking {
			return // quick, and the total is not known yet
		}
		// A stage begins, or the copying stage again (parts were written
		// to SRC meanwhile).
		if p.Stage != stage || p.Done < done {
			if bar != nil {
				bar.Finish()
			}
			what := "copy: " + string(p.Stage) + " parts"
			if p.Stage == stage {
				what += " written meanwhile"
			}
			stage = p.Stage
			bar = progress(g.stderr, o.json, p.Total, what, false)
		}
		done = p.Done
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
		return writeJSON(g.stdout, copyJSON{From: src.Location(), To: dst.Location(), Parts: res.Parts,
			PartsCopied: res.PartsCopied, PartsSkipped: res.PartsSkipped, BlobsCopied: res.BlobsCopied,
			BlobsSkipped: res.BlobsSkipped, BytesCopied: res.BytesCopied, PartsVerified: res.PartsVerified,
			BlobsVerified: res.BlobsVerified, BlobsRepaired: res.BlobsRepaired})
	}
	if res.PartsCopied == 0 && res.BlobsCopied == 0 {
		fmt.Fprintf(g.stdout, "nothing to copy: %s already holds all %s of %s\n", dst.Location(), count(int(res.Parts), "part"), src.Location())
	} else {
		fmt.Fprintf(g.stdout, "copied %s and %s (%s) from %s to %s; %s and %s were there already\n",
			count(int(res.PartsCopied), "part"), count(int(res.BlobsCopied), "blob"), size(res.BytesCopied), src.Location(), dst.Location(),
			count(int(res.PartsSkipped), "part"), count(int(res.BlobsSkipped), "blob"))
	}
	if res.BlobsRepaired > 0 {
		fmt.Fprintf(g.stdout, "repaired: %s that %s had lost or held damaged, copied again from %s\n",
			count(int(res.BlobsRepaired), "blob"), dst.Location(), src.Location())
	}
	fmt.Fprintf(g.stdout, "verified: %s, %s read back whole\n", count(int(res.PartsVerified), "part"), count(int(res.BlobsVerified), "blob"))
	return nil
}

// copyStoreOptions are the options that open one end of a copy: its
// index URL, and the cache of a store on S3.
func copyStoreOptions(loc, indexURL, cache string) []store.Option {
	var opts []store.Option
	if indexURL != "" {
		opts = append(opts, store.WithIndexURL(indexURL))
	}
	if cache != "" && store.IsRemoteLocation(loc) {
		opts = append(opts, store.WithCacheDir(cache))
	}
	return opts
}

// openCopySource opens the store copy reads, a directory or a store on
// S3: read-only, unless its index needs migrating first.
func openCopySource(ctx context.Context, loc, indexURL, cache string) (*store.Store, error) {
	if !store.IsRemoteLocation(loc) && !store.Exists(loc) {
		return nil, errNoStore(loc, "--from names the store to copy")
	}
	opts := copyStoreOptions(loc, indexURL, cache)
	s, err := store.Open(ctx, loc, append(opts, store.ReadOnly())...)
	if errors.Is(err, store.ErrOlderSchema) {
		s, err = store.Open(ctx, loc, opts...)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// openCopyDest opens the store copy writes to, making it with init: a
// directory, new or empty, or a store on S3 (whose bucket init makes).
func openCopyDest(ctx context.Context, loc, indexURL, cache string, init bool) (*store.Store, error) {
	opts := copyStoreOptions(loc, indexURL, cache)
	switch {
	case store.IsRemoteLocation(loc):
		if init {
			opts = append(opts, store.WithCreate())
		}
	case !store.Exists(loc):
		if !init {
			hint := "create it with casctl --store " + loc + " init"
			if indexURL != "" {
				hint += " --index URL"
			}
			return nil, errNoStore(loc, hint+", or add --init")
		}
		if err := checkEmptyDir(loc); err != nil {
			return nil, err
		}
		opts = append(opts, store.WithCreate())
	case init && indexURL != "":
		// As init does: a store whose first init could not reach its
		// database gets it now.
		opts = append(opts, store.WithCreate())
	}
	if !store.IsRemoteLocation(loc) {
		if err := writeAccess(loc); err != nil {
			return nil, err
		}
	}
	s, err := store.Open(ctx, loc, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}
