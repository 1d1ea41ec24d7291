package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/search"
)

// GrepOptions says what Grep looks for, and in which parts.
type GrepOptions struct {
	// Pattern is what a line must match.
	Pattern search.Pattern
	// Run, Tool and Since narrow the parts searched as they narrow List.
	Run   string
	Tool  string
	Since time.Time
	// AllVersions searches every version of a key, not only the newest.
	AllVersions bool
	// MaxCount stops after this many matching lines in one part; 0 is no
	// limit.
	MaxCount int
	// Width cuts a matching line to about this many bytes around its
	// match, marking the cut; 0 keeps lines whole.
	Width int
	// NoIndex reads every part searched, as if the store had no search
	// index.
	NoIndex bool
}

// A GrepHit is a matching line of a part.
type GrepHit struct {
	Part Part
	// Line is the line's number in the part, counted from 1.
	Line int64
	// Text is the line without its line break, cut to Width.
	Text string
	// Cut says Text is a piece of the line.
	Cut bool
}

// GrepResult says what a Grep read and found.
type GrepResult struct {
	// Parts and Blobs count the parts whose text was read and the blobs
	// holding it (a blob shared by several parts is read once); Bytes
	// counts the bytes read.
	Parts int64
	Blobs int64
	Bytes int64
	// Matched counts the parts with a matching line; Lines the matching
	// lines reported.
	Matched int64
	Lines   int64
	// Lag counts the blobs the search index did not cover yet, read in
	// full; Indexed says the index narrowed the search.
	Lag     int64
	Indexed bool
	// Binary counts parts skipped because their bytes are not text.
	Binary int64
	// Failed lists the parts whose bytes could not be read (missing or
	// damaged: see Verify); the search went on without them.
	Failed []GrepFailure
}

// A GrepFailure is a part Grep could not read.
type GrepFailure struct {
	Part Part
	Err  error
}

// maxGrepFailures is how many failures a GrepResult lists.
const maxGrepFailures = 100

// wholeRead is the largest blob Grep reads at once, in a worker; a larger
// one is matched as it streams, a search.ChunkSize at a time.
const wholeRead = 4 << 20

// grepBatch is how many blobs Grep reads in the order they are stored in:
// loose ones by id, then packed ones frame by frame, so that each frame of
// a pack is decoded once for all the blobs of the batch it holds.
const grepBatch = 512

// A packedBlobs is a blob store with packs, which it can say the position
// of a blob in and read it from directly (see cas.Store).
type packedBlobs interface {
	PackPosition(ctx context.Context, b cas.Blob) (pack string, frame int, offset int64, ok bool)
	OpenPacked(ctx context.Context, b cas.Blob) (*cas.Reader, error)
}

// sortForReading orders a batch of jobs as their blobs are stored.
func (s *Store) sortForReading(ctx context.Context, batch []*grepJob) {
	pb, ok := s.eng.backend().(packedBlobs)
	if !ok {
		return
	}
	type pos struct {
		pack   string
		frame  int
		offset int64
	}
	at := make(map[*grepJob]pos, len(batch))
	for _, j := range batch {
		if j.parts[0].Packed {
			if pack, frame, off, ok := pb.PackPosition(ctx, j.parts[0].Blob); ok {
				at[j] = pos{pack, frame, off}
				j.packed = true
			}
		}
	}
	slices.SortStableFunc(batch, func(a, b *grepJob) int {
		pa, pb := at[a], at[b]
		return cmp.Or(strings.Compare(pa.pack, pb.pack), cmp.Compare(pa.frame, pb.frame), cmp.Compare(pa.offset, pb.offset))
	})
}

// grepJob is one blob to read and match, and the parts that use it.
type grepJob struct {
	parts  []index.SearchPart
	done   chan struct{}
	hits   []grepLine
	bytes  int64
	binary bool
	err    error
	// packed says the blob was found in a pack: read it from there.
	packed bool
}

type grepLine struct {
	n    int64
	text string
	cut  bool
}

// Grep calls fn with every line matching o.Pattern in the text parts that
// o selects, blob by blob, the lines of one part together and in order.
// Blobs come in batches (of 512) in the order the blobs were first
// written, each batch in the order its blobs are stored (loose ones first,
// then pack by pack, frame by frame), so that a frame is decoded once. A blob is read once for all
// the parts that use it, from wherever it is (its file, a pack, the object
// store through the cache) and checked against its digest before its lines
// are reported (a blob over 4 MiB as it streams). The search index, where
// it covers a blob, rules blobs out without reading them; blobs it does
// not cover yet are read in full (Lag). Parts whose blobs cannot be read
// are listed in Failed and skipped. Grep stops at fn's first error or when
// ctx is done, returning that error.
func (s *Store) Grep(ctx context.Context, o GrepOptions, fn func(GrepHit) error) (GrepResult, error) {
	var res GrepResult
	m, err := search.Compile(o.Pattern)
	if err != nil {
		return res, fmt.Errorf("grep: %w", err)
	}
	if o.MaxCount < 0 || o.Width < 0 {
		return res, fmt.Errorf("grep: negative max count %d or width %d", o.MaxCount, o.Width)
	}
	cands, err := s.grepCandidates(ctx, m.Query(), o, &res)
	if err != nil {
		return res, fmt.Errorf("grep: %w", err)
	}
	jobs := make(chan *grepJob)
	order := make(chan *grepJob, 4*runtime.GOMAXPROCS(0))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range runtime.GOMAXPROCS(0) {
		go func() {
			for j := range jobs {
				s.grepBlob(ctx, m, o, j)
				close(j.done)
			}
		}()
	}
	feedErr := make(chan error, 1)
	go func() {
		defer close(order)
		defer close(jobs)
		var cur *grepJob
		var batch []*grepJob
		send := func(j *grepJob) error {
			select {
			case order <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
			if j.parts[0].Bytes > wholeRead {
				close(j.done) // streamed by the emitter, in order
				return nil
			}
			select {
			case jobs <- j:
				return nil
			case <-ctx.Done():
				// No worker takes it: the emitter waits on it all the same.
				j.err = ctx.Err()
				close(j.done)
				return ctx.Err()
			}
		}
		flush := func() error {
			s.sortForReading(ctx, batch)
			for i, j := range batch {
				if err := send(j); err != nil {
					for _, left := range batch[i+1:] {
						left.err = err
						close(left.done) // never sent: nothing waits on it
					}
					return err
				}
			}
			batch = batch[:0]
			return nil
		}
		err := s.ix.SearchParts(ctx, index.SearchPartsOptions{Run: o.Run, Tool: o.Tool, Since: o.Since,
			AllVersions: o.AllVersions}, cands, func(p index.SearchPart) error {
			if cur == nil || cur.parts[0].BlobID != p.BlobID {
				if len(batch) == grepBatch {
					if err := flush(); err != nil {
						return err
					}
				}
				cur = &grepJob{done: make(chan struct{})}
				batch = append(batch, cur)
			}
			cur.parts = append(cur.parts, p)
			return nil
		})
		if err == nil {
			err = flush()
		}
		feedErr <- err
	}()
	for j := range order {
		<-j.done
		if err := s.emit(ctx, m, o, j, &res, fn); err != nil {
			cancel()
			for j := range order {
				<-j.done
			}
			<-feedErr
			return res, err
		}
	}
	if err := <-feedErr; err != nil {
		return res, fmt.Errorf("grep: %w", err)
	}
	return res, ctx.Err()
}

// emit reports what a job found, streaming a blob too large for a worker.
func (s *Store) emit(ctx context.Context, m *search.Matcher, o GrepOptions, j *grepJob, res *GrepResult, fn func(GrepHit) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if j.parts[0].Bytes > wholeRead {
		return s.streamBlob(ctx, m, o, j, res, fn)
	}
	res.Blobs++
	res.Bytes += j.bytes
	for _, sp := range j.parts {
		switch {
		case j.err != nil:
			res.fail(sp, j.err)
			continue
		case j.binary:
			res.Binary++
			continue
		}
		res.Parts++
		if len(j.hits) > 0 {
			res.Matched++
		}
		for _, h := range j.hits {
			res.Lines++
			if err := fn(GrepHit{Part: partOf(sp.Part), Line: h.n, Text: h.text, Cut: h.cut}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (res *GrepResult) fail(sp index.SearchPart, err error) {
	if len(res.Failed) < maxGrepFailures {
		res.Failed = append(res.Failed, GrepFailure{Part: partOf(sp.Part), Err: err})
	}
}

// grepBlob reads a blob of at most wholeRead bytes and matches its lines.
func (s *Store) grepBlob(ctx context.Context, m *search.Matcher, o GrepOptions, j *grepJob) {
	if ctx.Err() != nil {
		j.err = ctx.Err()
		return
	}
	r, err := s.openForGrep(ctx, j)
	if err != nil {
		j.err = err
		return
	}
	data, err := io.ReadAll(io.LimitReader(r, wholeRead+1))
	r.Close()
	j.bytes = int64(len(data))
	if err != nil {
		j.err = err
		return
	}
	if bytes.IndexByte(data, 0) >= 0 {
		j.binary = true
		return
	}
	var fold []byte
	count := 0
	m.Lines(data, 1, &fold, func(n int64, line []byte, col int) bool {
		text, cut := search.Cut(line, col, o.Width)
		j.hits = append(j.hits, grepLine{n: n, text: text, cut: cut})
		count++
		return o.MaxCount == 0 || count < o.MaxCount
	})
}

// openForGrep opens a job's blob: from its pack when sortForReading found
// it there (a pack rewritten since is looked for again as Open does).
func (s *Store) openForGrep(ctx context.Context, j *grepJob) (*cas.Reader, error) {
	b := j.parts[0].Blob
	if pb, ok := s.eng.backend().(packedBlobs); ok && j.packed {
		r, err := pb.OpenPacked(ctx, b)
		if !errors.Is(err, cas.ErrNotFound) {
			return r, err
		}
	}
	return s.eng.backend().Open(ctx, b)
}

// streamBlob matches a large blob as it streams, reporting lines as it
// finds them, for each part that uses the blob: each part after the first
// reads the blob again, so that nothing is held but a chunk.
func (s *Store) streamBlob(ctx context.Context, m *search.Matcher, o GrepOptions, j *grepJob, res *GrepResult, fn func(GrepHit) error) error {
	res.Blobs++
	for _, sp := range j.parts {
		r, err := s.eng.backend().Open(ctx, sp.Blob)
		if err != nil {
			res.fail(sp, err)
			continue
		}
		var head [8 << 10]byte
		k, _ := io.ReadFull(r, head[:])
		if bytes.IndexByte(head[:k], 0) >= 0 {
			r.Close()
			res.Binary++
			continue
		}
		counted := &ctxReader{r: io.MultiReader(bytes.NewReader(head[:k]), r), ctx: ctx}
		count := 0
		var fnErr error
		part := partOf(sp.Part)
		err = m.Scan(counted, func(n int64, line []byte, col int) bool {
			text, cut := search.Cut(line, col, o.Width)
			count++
			res.Lines++
			if fnErr = fn(GrepHit{Part: part, Line: n, Text: text, Cut: cut}); fnErr != nil {
				return false
			}
			return o.MaxCount == 0 || count < o.MaxCount
		})
		r.Close()
		res.Bytes += counted.n
		if fnErr != nil {
			return fnErr
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			res.fail(sp, err)
			continue
		}
		res.Parts++
		if count > 0 {
			res.Matched++
		}
	}
	return nil
}

// ctxReader counts what it reads and stops when ctx is done.
type ctxReader struct {
	r   io.Reader
	ctx context.Context
	n   int64
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// grepCandidates returns the blobs that may hold a match, in increasing
// order of id: those the index's postings do not rule out, and those it
// does not cover yet, as one snapshot of the index has them.
func (s *Store) grepCandidates(ctx context.Context, q *search.Query, o GrepOptions, res *GrepResult) ([]int64, error) {
	var inRun map[int64]bool
	if o.Run != "" {
		// A run's parts are found from its rows; below a few megabytes,
		// reading them all costs less than the postings would.
		blobs, size, err := s.ix.RunTextBlobs(ctx, o.Run)
		if err != nil {
			return nil, err
		}
		if size <= runScanBytes || o.NoIndex || q.Op == search.All {
			return blobs, nil
		}
		inRun = make(map[int64]bool, len(blobs))
		for _, b := range blobs {
			inRun[b] = true
		}
	}
	cands, err := s.indexCandidates(ctx, q, o, res)
	if err != nil || inRun == nil {
		return cands, err
	}
	return slices.DeleteFunc(cands, func(b int64) bool { return !inRun[b] }), nil
}

// runScanBytes is the most text of a run that a search of the run reads
// without asking the index.
var runScanBytes int64 = 16 << 20

// indexCandidates returns the blobs the index does not rule out, and the
// blobs it does not cover yet, in increasing order of id.
func (s *Store) indexCandidates(ctx context.Context, q *search.Query, o GrepOptions, res *GrepResult) ([]int64, error) {
	narrow := !o.NoIndex && q.Op != search.All
	var needed []search.Trigram
	if narrow {
		needed = q.Needed()
	}
	v, err := s.ix.SearchView(ctx, needed)
	if err != nil {
		return nil, err
	}
	res.Indexed = narrow && len(v.Segments) > 0
	res.Lag = int64(len(v.Lag))
	cands := slices.Clone(v.Lag)
	for _, sg := range v.Segments {
		if !narrow {
			cands = append(cands, sg.Blobs...)
			continue
		}
		lists := map[search.Trigram]search.Set{}
		for t, l := range v.Postings[sg.ID] {
			set, err := search.DecodePosting(l, len(sg.Blobs))
			if err != nil {
				return nil, fmt.Errorf("search segment %d: %w", sg.ID, err)
			}
			lists[t] = set
		}
		q.EvalSet(len(sg.Blobs), func(t search.Trigram) search.Set { return lists[t] }).Each(func(i int) {
			cands = append(cands, sg.Blobs[i])
		})
	}
	slices.Sort(cands)
	return slices.Compact(cands), nil
}

// SearchIndexResult says what IndexSearch did.
type SearchIndexResult struct {
	// Segments counts the segments written; Blobs and Bytes the blobs
	// indexed and their text bytes; Empty the blobs with no text to index.
	Segments int
	Blobs    int64
	Bytes    int64
	Empty    int64
	// Failed counts blobs that could not be read: they stay in the lag,
	// and verify says why.
	Failed int64
	// LagBlobs and LagBytes are what no segment covers afterwards.
	LagBlobs int64
	LagBytes int64
	// Dropped counts the segments dropped before (mostly dead, or small
	// ones merged): their live blobs were indexed again.
	Dropped int
}

// Search index segments: a segment is written once it holds this many
// blobs or text bytes.
const (
	segmentBlobs = 4096
	segmentBytes = 64 << 20
)

// IndexSearch brings the search index up to date: it reads every blob no
// segment covers yet and records segments of their trigrams. Blobs that
// cannot be read stay uncovered, and searches read them (and report
// them) until they are mended or gone. It is safe beside writers, gc and
// other IndexSearch calls: a blob covered twice counts for one segment.
func (s *Store) IndexSearch(ctx context.Context) (SearchIndexResult, error) {
	var res SearchIndexResult
	if _, err := s.writer("index search"); err != nil {
		return res, err
	}
	ex := search.NewExtractor()
	b := search.NewBuilder()
	var ids, empty []int64
	var text, through int64
	flush := func() error {
		if len(ids) == 0 && len(empty) == 0 {
			return nil
		}
		_, err := s.ix.AddSearchSegment(ctx, index.SearchSegmentRecord{Blobs: ids, Bytes: text, Empty: empty, Through: through,
			Postings: func(add func(uint32, []byte) error) error {
				return b.Postings(func(t search.Trigram, l []byte) error { return add(t, l) })
			}})
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			res.Segments++
		}
		res.Blobs += int64(len(ids))
		res.Bytes += text
		res.Empty += int64(len(empty))
		ids, empty, text, b = ids[:0], empty[:0], 0, search.NewBuilder()
		return nil
	}
	buf := make([]byte, search.ChunkSize)
	// The blobs stored by the time it starts: busy writers never keep a
	// catch-up going.
	last, err := s.ix.MaxBlobID(ctx)
	if err != nil {
		return res, fmt.Errorf("index search: %w", err)
	}
	for after := int64(0); ; {
		lag, err := s.ix.UnsearchedBlobs(ctx, after, 1024)
		if err != nil {
			return res, fmt.Errorf("index search: %w", err)
		}
		lag = slices.DeleteFunc(lag, func(ub index.UnsearchedBlob) bool { return ub.ID > last })
		for _, ub := range lag {
			through = ub.ID
			if !ub.Text {
				empty = append(empty, ub.ID)
				continue
			}
			n, isText, err := s.trigramsOf(ctx, ub, ex, buf)
			switch {
			case ctx.Err() != nil:
				return res, ctx.Err()
			case err != nil:
				res.Failed++
				continue
			case !isText:
				empty = append(empty, ub.ID)
				continue
			}
			b.Add(ex.Trigrams())
			ids = append(ids, ub.ID)
			text += n
			if len(ids) >= segmentBlobs || text >= segmentBytes {
				if err := flush(); err != nil {
					return res, fmt.Errorf("index search: %w", err)
				}
			}
		}
		if len(lag) < 1024 {
			break
		}
		after = lag[len(lag)-1].ID
	}
	if res.Failed > 0 && len(ids) == 0 && len(empty) == 0 {
		through = 0 // nothing to record
	}
	if err := flush(); err != nil {
		return res, fmt.Errorf("index search: %w", err)
	}
	if res.LagBlobs, res.LagBytes, err = s.ix.SearchLag(ctx); err != nil {
		return res, fmt.Errorf("index search: %w", err)
	}
	return res, nil
}

// trigramsOf reads a blob, checked against its digest, into ex (reset
// first) and returns its size and whether it is text (no NUL byte).
func (s *Store) trigramsOf(ctx context.Context, ub index.UnsearchedBlob, ex *search.Extractor, buf []byte) (int64, bool, error) {
	ex.Reset()
	r, err := s.eng.backend().Open(ctx, ub.Blob)
	if err != nil {
		return 0, false, err
	}
	defer r.Close()
	var n int64
	keep := 0
	for {
		k, err := io.ReadFull(r, buf[keep:])
		if bytes.IndexByte(buf[keep:keep+k], 0) >= 0 {
			return n, false, nil
		}
		ex.Add(buf[:keep+k])
		n += int64(k)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
		keep = copy(buf, buf[len(buf)-2:])
		if err := ctx.Err(); err != nil {
			return n, false, err
		}
	}
}

var _ hook.Searcher = (*Store)(nil)

// Search is Grep over one run's parts, for the read-back tool (see
// hook.Searcher).
func (s *Store) Search(ctx context.Context, run string, q hook.SearchQuery, fn func(hook.SearchHit) error) error {
	if run == "" {
		return fmt.Errorf("search: %w: a search is scoped to a run", hook.ErrRefused)
	}
	_, err := s.Grep(ctx, GrepOptions{Pattern: search.Pattern{Expr: q.Pattern, Fixed: q.Fixed, IgnoreCase: q.IgnoreCase},
		Run: run, Tool: q.Tool, Width: q.Width}, func(h GrepHit) error {
		return fn(hook.SearchHit{Key: h.Part.Key, Line: h.Line, Text: h.Text})
	})
	return err
}

// SearchLag counts the blobs, and their bytes, that the search index does
// not cover yet: what every search reads in full until IndexSearch runs.
func (s *Store) SearchLag(ctx context.Context) (blobs, bytes int64, err error) {
	return s.ix.SearchLag(ctx)
}

// maintainSearch is what gc and pack do for the search index on a store in
// a local directory (on an object store, indexing would fetch every blob:
// casctl grep does it there). Both drop the segments that are mostly dead
// (and small ones, to merge them), which costs a few statements; pack, which
// has just read the blobs it packed, then indexes what no segment covers.
// gc does not: its time must not grow with what writers stored since, and
// the blobs of dropped segments are read by searches until a pack or a
// grep indexes them again. It is best effort: a search reads what the index
// does not cover, so a failure costs time, never a hit.
func (s *Store) maintainSearch(ctx context.Context, catchUp bool) SearchIndexResult {
	var res SearchIndexResult
	if _, local := s.eng.(packer); !local || s.readOnly {
		return res
	}
	drop, err := s.segmentsToDrop(ctx)
	if err == nil && len(drop) > 0 {
		err = s.ix.DropSearchSegments(ctx, drop)
	}
	if catchUp {
		res, _ = s.IndexSearch(ctx)
	} else {
		res.LagBlobs, res.LagBytes, _ = s.ix.SearchLag(ctx)
	}
	if err == nil {
		res.Dropped = len(drop)
	}
	return res
}

// Segments a gc drops: one whose live blobs are fewer than half of those
// it lists, and, when at least smallSegments segments are under a quarter
// of a full one, those.
const smallSegments = 8

func (s *Store) segmentsToDrop(ctx context.Context) ([]int64, error) {
	segs, err := s.ix.SearchSegments(ctx)
	if err != nil {
		return nil, err
	}
	live, err := s.ix.SearchSegmentLive(ctx)
	if err != nil {
		return nil, err
	}
	var drop, small []int64
	for _, sg := range segs {
		n := int64(len(sg.Blobs))
		switch {
		case 2*live[sg.ID] < n:
			drop = append(drop, sg.ID)
		case n < segmentBlobs/4 && sg.Bytes < segmentBytes/4:
			small = append(small, sg.ID)
		}
	}
	if len(small) >= smallSegments {
		drop = append(drop, small...)
	}
	return drop, nil
}
