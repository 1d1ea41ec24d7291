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
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/cancel"
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
	// Blobs counts the blobs read (a blob shared by several parts is read
	// once) and Bytes their bytes; Parts the parts of those with a
	// matching line that the search selects (the rows of the others are
	// never read).
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
	// Binary counts blobs skipped because their bytes are not text.
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
	PackPosition(ctx context.Context, b cas.Blob) (pack string, e cas.PackEntry, ok bool)
	PackPositionIn(ctx context.Context, pack string, b cas.Blob) (string, cas.PackEntry, bool)
	LoadPackTables(ctx context.Context, names []string)
	OpenPacked(ctx context.Context, b cas.Blob) (*cas.Reader, error)
	PackedBytes(ctx context.Context, b cas.Blob) ([]byte, *cas.Reader, error)
	DecodeFrame(ctx context.Context, pack string, frame int, dst []byte) ([]byte, error)
}

// sortForReading orders a batch of jobs as their blobs are stored, and
// groups them for the workers: the blobs of one frame of a pack together
// (a worker decodes the frame once for all of them), every other blob
// alone.
func (s *Store) sortForReading(ctx context.Context, batch []*grepJob) [][]*grepJob {
	pb, ok := s.eng.backend().(packedBlobs)
	if ok {
		var packs []string
		seen := map[string]bool{}
		for _, j := range batch {
			if j.blob.Packed && !seen[j.blob.Pack] {
				seen[j.blob.Pack] = true
				packs = append(packs, j.blob.Pack)
			}
		}
		pb.LoadPackTables(ctx, packs)
		for _, j := range batch {
			if j.blob.Packed {
				j.pack, j.entry, j.packed = pb.PackPositionIn(ctx, j.blob.Pack, j.blob.Blob)
			}
		}
		slices.SortStableFunc(batch, func(a, b *grepJob) int {
			return cmp.Or(strings.Compare(a.pack, b.pack), cmp.Compare(a.entry.Frame, b.entry.Frame), cmp.Compare(a.entry.Offset, b.entry.Offset))
		})
	}
	var units [][]*grepJob
	for i, j := range batch {
		if n := len(units); n > 0 && j.inSmallFrame() {
			prev := batch[i-1]
			if prev.inSmallFrame() && prev.pack == j.pack && prev.entry.Frame == j.entry.Frame {
				units[n-1] = append(units[n-1], j)
				continue
			}
		}
		units = append(units, batch[i:i+1:i+1])
	}
	return units
}

// grepJob is one blob to read and match.
type grepJob struct {
	blob index.SearchBlob
	// done is closed once the job is: the jobs of a unit share it.
	done     chan struct{}
	hits     []grepLine
	hitBytes int64
	bytes    int64
	binary   bool
	err      error
	// packed says the blob was found in a pack, at entry of pack: read it
	// from there.
	packed bool
	pack   string
	entry  cas.PackEntry
	// large says the blob is over wholeRead: the worker only looked for a
	// matching line (matched), and the emitter streams the blob again for
	// each of its parts.
	large, matched bool
}

// inSmallFrame says the job's blob is read in a frame of small blobs,
// decoded whole, with the other candidates it holds.
func (j *grepJob) inSmallFrame() bool { return j.packed && j.entry.Size <= cas.FrameSize/2 }

type grepLine struct {
	n    int64
	text string
	cut  bool
}

// Hits wait for their parts' rows in groups of up to this many blobs or
// bytes of lines, or for pendingWait while no blob is ready.
const (
	pendingBlobs = 400
	pendingBytes = 8 << 20
	pendingWait  = 5 * time.Millisecond
)

// Grep calls fn with every line matching o.Pattern in the text parts that
// o selects, blob by blob, the lines of one part together and in order.
// Blobs come in the order they are stored in, as the search index lists
// them (the blobs it does not cover yet first, by id), each batch of 512
// sorted again by where its blobs are (loose ones first, then pack by
// pack, frame by frame), so that a frame is decoded once. A blob is read
// once, from wherever it is (its file, a pack, the object store through
// the cache), and matched before any row of its parts is read: only the
// blobs with a matching line cost a lookup of the parts that use them
// (and that o selects). A blob is checked against its digest before its
// lines are reported (a blob over 4 MiB is read twice: once to find a
// matching line, then as it streams for each part, lines reported as they
// come). The search index, where it covers a blob, rules blobs out without
// reading them; blobs it does not cover yet are read in full (Lag). Parts
// whose blobs cannot be read are listed in Failed and skipped. fn is called
// by one goroutine, not the caller's, and never after Grep returns. Grep
// stops at fn's first error or when ctx is done, returning that error.
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
	units := make(chan []*grepJob)
	order := make(chan []*grepJob, 2*runtime.GOMAXPROCS(0))
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	workers := s.startGrepWorkers(ctx, m, o, units)
	feedErr := make(chan error, 1)
	go func() {
		defer close(order)
		defer close(units)
		feedErr <- s.feedGrep(ctx, cands, units, order)
	}()
	popts := index.SearchPartsOptions{Run: o.Run, Tool: o.Tool, Since: o.Since, AllVersions: o.AllVersions}
	// The parts of a batch of blobs are looked up, and their lines
	// reported, by a goroutine of its own while the next batch gathers:
	// done here, each lookup stopped the workers once the order's few
	// units were waiting (about a tenth of a search that reads every
	// blob). At most one batch waits for it.
	batches := make(chan []*grepJob, 1)
	emitted := make(chan error, 1)
	go func() {
		var err error
		for batch := range batches {
			if err == nil {
				if err = s.emitBatch(ctx, m, o, popts, batch, &res, fn); err != nil {
					stop()
				}
			}
		}
		emitted <- err
	}()
	col := grepCollector{batches: batches}
	err = func() error {
		for u := range order {
			for _, j := range u {
				if err := col.add(ctx, j, &res); err != nil {
					return err
				}
			}
		}
		return col.flush(ctx)
	}()
	close(batches)
	if eerr := <-emitted; eerr != nil {
		err = eerr // the lookup's own error: the rest saw only its cancel
	}
	if err != nil {
		stop()
		<-feedErr
		workers.Wait()
		return res, err
	}
	if err := <-feedErr; err != nil {
		return res, fmt.Errorf("grep: %w", err)
	}
	return res, ctx.Err()
}

// startGrepWorkers starts a worker a processor, each reading the units
// sent on units (a frame's blobs, or one blob) and marking their jobs
// done, until units is closed; the group says when all have returned.
func (s *Store) startGrepWorkers(ctx context.Context, m *search.Matcher, o GrepOptions, units <-chan []*grepJob) *sync.WaitGroup {
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			buf := []byte{} // reused (hits are copied out of it), and so made for any frame
			for u := range units {
				if u[0].inSmallFrame() {
					buf = s.grepFrame(ctx, m, o, u, buf)
				} else {
					buf = s.grepBlob(ctx, m, o, u[0], buf)
				}
				close(u[0].done)
			}
		})
	}
	return &workers
}

// feedGrep reads the candidates' blob rows a batch at a time and sends
// each batch's units, in the order they are best read, first to a worker
// (units), then to the collector (order), which waits for their jobs in
// that order: workers never wait for the collector, and the units in
// flight are one a worker and the order's buffer.
func (s *Store) feedGrep(ctx context.Context, cands []int64, units, order chan<- []*grepJob) error {
	send := func(u []*grepJob) error {
		select {
		case units <- u:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case order <- u:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The rows of the next batch are read while the workers take this
	// one's units: in a process of its own, reading them was a third of a
	// selective search, and the workers waited for it.
	type fetched struct {
		blobs []index.SearchBlob
		err   error
	}
	rows := make(chan fetched, 1)
	fetchCtx, stopFetch := context.WithCancel(ctx)
	var fetcher sync.WaitGroup
	defer func() {
		stopFetch()
		fetcher.Wait()
	}()
	fetcher.Go(func() {
		defer close(rows)
		for rest := cands; len(rest) > 0; {
			n := min(grepBatch, len(rest))
			blobs, err := s.ix.SearchBlobs(fetchCtx, rest[:n])
			rest = rest[n:]
			select {
			case rows <- fetched{blobs, err}:
			case <-fetchCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	for f := range rows {
		if f.err != nil {
			return f.err
		}
		// The batch's jobs in one piece of memory, a channel a unit: a
		// search of thousands of candidates made them one by one.
		jobs, batch := make([]grepJob, len(f.blobs)), make([]*grepJob, len(f.blobs))
		for i, b := range f.blobs {
			jobs[i].blob = b
			batch[i] = &jobs[i]
		}
		for _, u := range s.sortForReading(ctx, batch) {
			done := make(chan struct{})
			for _, j := range u {
				j.done = done
			}
			if err := send(u); err != nil {
				return err
			}
		}
	}
	// The rows end early only when the search was stopped.
	return ctx.Err()
}

// grepCollector takes the jobs in order as they are done, counts them, and
// gathers those with hits into batches for the emitter: a batch goes when
// it holds enough blobs or bytes, or, when the next job is not done yet,
// once its first job has waited long enough (each batch costs a
// statement).
type grepCollector struct {
	batches chan<- []*grepJob
	pending []*grepJob
	held    int64
	since   time.Time // when the first pending job was done
}

func (c *grepCollector) flush(ctx context.Context) error {
	if len(c.pending) == 0 {
		return nil
	}
	select {
	case c.batches <- c.pending:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.pending, c.held = nil, 0
	return nil
}

// add waits for j, counts it in res, and keeps it for the emitter if it
// has hits or an error.
func (c *grepCollector) add(ctx context.Context, j *grepJob, res *GrepResult) error {
	select {
	case <-j.done:
	default:
		if len(c.pending) > 0 && time.Since(c.since) >= pendingWait {
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
		<-j.done
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	res.Blobs++
	res.Bytes += j.bytes
	switch {
	case j.binary:
		res.Binary++
		return nil
	case j.err == nil && len(j.hits) == 0 && !j.matched:
		return nil
	}
	if len(c.pending) == 0 {
		c.since = time.Now()
	}
	c.pending = append(c.pending, j)
	c.held += j.hitBytes
	if len(c.pending) >= pendingBlobs || c.held >= pendingBytes {
		return c.flush(ctx)
	}
	return nil
}

// emitBatch looks up the parts of a batch of blobs with matching lines
// and reports them, blob by blob.
func (s *Store) emitBatch(ctx context.Context, m *search.Matcher, o GrepOptions, popts index.SearchPartsOptions, batch []*grepJob, res *GrepResult, fn func(GrepHit) error) error {
	blobs := make([]index.SearchBlob, len(batch))
	for i, j := range batch {
		blobs[i] = j.blob
	}
	parts := make(map[int64][]index.SearchPart, len(batch))
	if err := s.ix.SearchParts(ctx, popts, blobs, func(sp index.SearchPart) error {
		parts[sp.BlobID] = append(parts[sp.BlobID], sp)
		return nil
	}); err != nil {
		return err
	}
	for _, j := range batch {
		if err := s.emit(ctx, m, o, j, parts[j.blob.ID], res, fn); err != nil {
			return err
		}
	}
	return nil
}

// emit reports what a job found for each part of its blob that the search
// selects, streaming a blob too large for a worker.
func (s *Store) emit(ctx context.Context, m *search.Matcher, o GrepOptions, j *grepJob, parts []index.SearchPart, res *GrepResult, fn func(GrepHit) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if j.large && j.err == nil {
		return s.streamBlob(ctx, m, o, parts, res, fn)
	}
	for _, sp := range parts {
		if j.err != nil {
			res.fail(sp, j.err)
			continue
		}
		res.Parts++
		if len(j.hits) > 0 {
			res.Matched++
		}
		for _, h := range j.hits {
			res.Lines++
			if err := fn(GrepHit{Part: sp.Part, Line: h.n, Text: h.text, Cut: h.cut}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (res *GrepResult) fail(sp index.SearchPart, err error) {
	if len(res.Failed) < maxGrepFailures {
		res.Failed = append(res.Failed, GrepFailure{Part: sp.Part, Err: err})
	}
}

// grepBlob reads a blob of at most wholeRead bytes into buf (grown as
// needed, and returned) and matches its lines; of a larger one, it finds
// whether a line matches.
func (s *Store) grepBlob(ctx context.Context, m *search.Matcher, o GrepOptions, j *grepJob, buf []byte) []byte {
	if ctx.Err() != nil {
		j.err = ctx.Err()
		return buf
	}
	if pb, ok := s.eng.backend().(packedBlobs); ok && j.packed && j.blob.Size <= wholeRead {
		// A blob of a pack's small frame is matched in the decoded frame,
		// and checked against its digest only when it has lines to report.
		data, r, err := pb.PackedBytes(ctx, j.blob.Blob)
		switch {
		case err == nil && r == nil:
			matchPacked(m, o, j, data)
			return buf
		case err == nil:
			r.Close()
		case !errors.Is(err, cas.ErrNotFound):
			j.err = err
			return buf
		}
	}
	r, err := s.openForGrep(ctx, j)
	if err != nil {
		j.err = err
		return buf
	}
	defer r.Close()
	if j.blob.Size > wholeRead {
		j.large = true
		var head [8 << 10]byte
		k, _ := io.ReadFull(r, head[:])
		if bytes.IndexByte(head[:k], 0) >= 0 {
			j.binary, j.bytes = true, int64(k)
			return buf
		}
		counted := cancel.NewReader(ctx, io.MultiReader(bytes.NewReader(head[:k]), r))
		j.err = m.Scan(counted, func(int64, []byte, int) bool {
			j.matched = true
			return false
		})
		j.bytes = counted.Count()
		return buf
	}
	// Read as much as the row says, and one byte more: a blob of another
	// size fails its digest check either way.
	if int64(cap(buf)) < j.blob.Size+1 {
		buf = make([]byte, j.blob.Size+1)
	}
	data := buf[:j.blob.Size+1]
	n, err := io.ReadFull(r, data)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		data, err = data[:n], nil
	case err == nil:
		var rest []byte
		rest, err = io.ReadAll(io.LimitReader(r, wholeRead))
		data = append(data, rest...)
	}
	j.bytes = int64(len(data))
	if err != nil {
		j.err = err
		return buf
	}
	if bytes.IndexByte(data, 0) >= 0 {
		j.binary = true
		return buf
	}
	matchLines(m, o, j, data)
	return buf
}

// grepFrame matches the jobs of a unit, blobs of one frame of a pack,
// in the frame decoded once into buf (grown as needed, and returned).
// Should the frame not decode (gc rewrote the pack since, or it is
// damaged), each blob is read as grepBlob reads it, which finds it again
// or says what is wrong with it.
func (s *Store) grepFrame(ctx context.Context, m *search.Matcher, o GrepOptions, u []*grepJob, buf []byte) []byte {
	pb := s.eng.backend().(packedBlobs) // sortForReading made the unit
	data, err := pb.DecodeFrame(ctx, u[0].pack, u[0].entry.Frame, buf)
	if err != nil || ctx.Err() != nil {
		for _, j := range u {
			buf = s.grepBlob(ctx, m, o, j, buf)
		}
		return buf
	}
	for _, j := range u {
		if err := ctx.Err(); err != nil {
			j.err = err
			continue
		}
		if e := j.entry; e.Offset >= 0 && e.Size >= 0 && e.Offset+e.Size <= int64(len(data)) {
			matchPacked(m, o, j, data[e.Offset:e.Offset+e.Size:e.Offset+e.Size])
		} else {
			s.grepBlob(ctx, m, o, j, nil) // not in buf: data is there
		}
	}
	return data
}

// matchPacked matches a packed blob's bytes, not checked yet against its
// digest: they are, when they have lines to report.
func matchPacked(m *search.Matcher, o GrepOptions, j *grepJob, data []byte) {
	j.bytes = int64(len(data))
	if bytes.IndexByte(data, 0) >= 0 {
		j.binary = true
		return
	}
	matchLines(m, o, j, data)
	if len(j.hits) > 0 {
		if err := cas.CheckBytes(j.blob.Blob, data); err != nil {
			j.hits, j.err = nil, fmt.Errorf("read: %w", err)
		}
	}
}

// matchLines finds a blob's matching lines.
func matchLines(m *search.Matcher, o GrepOptions, j *grepJob, data []byte) {
	var fold []byte
	count := 0
	m.Lines(data, 1, &fold, func(n int64, line []byte, col int) bool {
		text, cut := search.Cut(line, col, o.Width)
		j.hits = append(j.hits, grepLine{n: n, text: text, cut: cut})
		j.hitBytes += int64(len(text))
		count++
		return o.MaxCount == 0 || count < o.MaxCount
	})
}

// openForGrep opens a job's blob: from its pack when sortForReading found
// it there (a pack rewritten since is looked for again as Open does).
func (s *Store) openForGrep(ctx context.Context, j *grepJob) (*cas.Reader, error) {
	b := j.blob.Blob
	if pb, ok := s.eng.backend().(packedBlobs); ok && j.packed {
		r, err := pb.OpenPacked(ctx, b)
		if !errors.Is(err, cas.ErrNotFound) {
			return r, err
		}
	}
	return s.eng.backend().Open(ctx, b)
}

// streamBlob matches a large blob as it streams, reporting lines as it
// finds them, for each part that uses the blob: each part reads the blob
// again, so that nothing is held but a chunk.
func (s *Store) streamBlob(ctx context.Context, m *search.Matcher, o GrepOptions, parts []index.SearchPart, res *GrepResult, fn func(GrepHit) error) error {
	for _, sp := range parts {
		r, err := s.eng.backend().Open(ctx, sp.Blob)
		if err != nil {
			res.fail(sp, err)
			continue
		}
		counted := cancel.NewReader(ctx, r)
		count := 0
		var fnErr error
		part := sp.Part
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
		res.Bytes += counted.Count()
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
// blobs it does not cover yet, in the order they are stored in: those the
// index does not cover by id, then segment by segment, block by block, so
// that the blobs of a pack's frame come together.
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
	res.Lag = int64(len(v.Lag))
	cands := slices.Clone(v.Lag)
	for _, sg := range v.Segments {
		if !narrow {
			cands = append(cands, sg.InReadingOrder(nil)...)
			continue
		}
		res.Indexed = true
		lists := map[search.Trigram]search.Set{}
		for t, l := range v.Postings[sg.ID] {
			set, err := search.DecodePosting(l, sg.NBlocks)
			if err != nil {
				return nil, fmt.Errorf("search segment %d: %w", sg.ID, err)
			}
			lists[t] = set
		}
		blocks := q.EvalSet(sg.NBlocks, func(t search.Trigram) search.Set { return lists[t] })
		cands = append(cands, sg.InReadingOrder(blocks.Has)...)
	}
	return cands, nil
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
// blocks, text bytes or blobs. Larger segments make a smaller index (a
// trigram's list costs a few bytes a segment beside its positions) and
// take longer to index again when gc drops one. A block of packed blobs
// ends with its frame, or once it holds searchBlockBytes of text: larger
// blocks make a smaller index, and a search reads more blobs for each
// block a trigram query does not rule out (docs/design.md has the
// measurements). IndexSearch
// reads the blobs no segment covers searchChunk at a time, in the order
// they are stored in.
const (
	segmentBlocks    = 4096
	segmentBytes     = 256 << 20
	segmentBlobs     = 1 << 20
	searchBlockBytes = 256 << 10
	searchChunk      = 16384
)

// IndexSearch brings the search index up to date: it reads every blob no
// segment covers yet and records segments of their trigrams. A loose blob
// is a block of its own; packed blobs side by side in a frame share a
// block (up to searchBlockBytes of text), since reading any of them
// decodes the whole frame: the index then grows with the distinct text of
// the blocks, as the packs do, not with their size. Blobs that cannot be
// read stay uncovered, and searches read them (and report them) until
// they are mended or gone. It is safe beside writers, gc and other
// IndexSearch calls: a blob covered twice counts for one segment.
func (s *Store) IndexSearch(ctx context.Context) (SearchIndexResult, error) {
	var res SearchIndexResult
	if _, err := s.writer("index search"); err != nil {
		return res, err
	}
	ix := &searchIndexer{s: s, ex: search.NewExtractor(), b: search.NewBuilder(), buf: make([]byte, search.ChunkSize), res: &res}
	// The blobs stored by the time it starts: busy writers never keep a
	// catch-up going.
	last, err := s.ix.MaxBlobID(ctx)
	if err != nil {
		return res, fmt.Errorf("index search: %w", err)
	}
	for after := int64(0); ; {
		lag, err := s.ix.UnsearchedBlobs(ctx, after, searchChunk)
		if err != nil {
			return res, fmt.Errorf("index search: %w", err)
		}
		full := len(lag) == searchChunk
		if len(lag) > 0 {
			after = lag[len(lag)-1].ID
		}
		lag = slices.DeleteFunc(lag, func(ub index.UnsearchedBlob) bool { return ub.ID > last })
		if err := ix.chunk(ctx, lag); err != nil {
			return res, err
		}
		if !full {
			break
		}
	}
	if res.Failed > 0 && len(ix.ids) == 0 && len(ix.empty) == 0 {
		ix.through = 0 // nothing to record
	}
	if err := ix.flush(ctx); err != nil {
		return res, fmt.Errorf("index search: %w", err)
	}
	if res.LagBlobs, res.LagBytes, err = s.ix.SearchLag(ctx); err != nil {
		return res, fmt.Errorf("index search: %w", err)
	}
	return res, nil
}

// searchIndexer is the state of an IndexSearch: the segment it is making,
// and the block it is reading.
type searchIndexer struct {
	s   *Store
	ex  *search.Extractor
	b   *search.Builder
	buf []byte
	res *SearchIndexResult
	// The segment: its blobs, their blocks and where they were read from,
	// its text bytes, and the blobs with nothing to index.
	ids     []int64
	blocks  []int
	packed  []bool
	empty   []int64
	text    int64
	through int64
	// inBlock counts the blobs of the block being read (whose trigrams ex
	// holds), and blockText their bytes.
	inBlock   int
	blockText int64
}

// frameOf is where a blob of a chunk is stored: in a frame of a pack, or
// loose (pack "").
type frameOf struct {
	pack   string
	frame  int
	offset int64
}

// chunk indexes blobs in the order they are stored in: loose ones by id,
// then pack by pack, frame by frame.
func (ix *searchIndexer) chunk(ctx context.Context, lag []index.UnsearchedBlob) error {
	at := make([]frameOf, len(lag))
	if pb, ok := ix.s.eng.backend().(packedBlobs); ok {
		for i, ub := range lag {
			if pack, e, ok := pb.PackPosition(ctx, ub.Blob); ok {
				at[i] = frameOf{pack, e.Frame, e.Offset}
			}
		}
	}
	order := make([]int, len(lag))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(strings.Compare(at[a].pack, at[b].pack), cmp.Compare(at[a].frame, at[b].frame),
			cmp.Compare(at[a].offset, at[b].offset))
	})
	var block frameOf
	for _, i := range order {
		ub := lag[i]
		ix.through = max(ix.through, ub.ID)
		if !ub.Text {
			ix.empty = append(ix.empty, ub.ID)
			continue
		}
		if ix.inBlock > 0 && (at[i].pack == "" || at[i].pack != block.pack || at[i].frame != block.frame ||
			ix.blockText >= searchBlockBytes) {
			if err := ix.endBlock(ctx); err != nil {
				return err
			}
		}
		block = at[i]
		n, isText, err := ix.s.addTrigrams(ctx, ub, ix.ex, ix.buf)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			ix.res.Failed++
			continue
		case !isText:
			ix.empty = append(ix.empty, ub.ID)
			continue
		}
		ix.ids = append(ix.ids, ub.ID)
		ix.blocks = append(ix.blocks, ix.b.Len())
		ix.packed = append(ix.packed, at[i].pack != "")
		ix.text += n
		ix.blockText += n
		ix.inBlock++
	}
	return ix.endBlock(ctx)
}

// closeBlock adds the block read so far, if any, to the segment.
func (ix *searchIndexer) closeBlock() {
	if ix.inBlock > 0 {
		ix.b.Add(ix.ex.Trigrams())
		ix.ex.Reset()
		ix.inBlock, ix.blockText = 0, 0
	}
}

// endBlock adds the block read so far to the segment, and records the
// segment once it is full.
func (ix *searchIndexer) endBlock(ctx context.Context) error {
	ix.closeBlock()
	if ix.b.Len() >= segmentBlocks || ix.text >= segmentBytes || len(ix.ids) >= segmentBlobs {
		if err := ix.flush(ctx); err != nil {
			return fmt.Errorf("index search: %w", err)
		}
	}
	return nil
}

// flush records the segment made so far.
func (ix *searchIndexer) flush(ctx context.Context) error {
	ix.closeBlock()
	if len(ix.ids) == 0 && len(ix.empty) == 0 {
		return nil
	}
	// The index lists a segment's blobs by id; each keeps its block.
	order := make([]int, len(ix.ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ix.ids[a], ix.ids[b]) })
	rec := index.SearchSegmentRecord{Bytes: ix.text, Empty: ix.empty, Through: ix.through,
		Blobs: make([]int64, len(order)), Blocks: make([]int, len(order)), Packed: make([]bool, len(order)),
		Postings: func(add func(uint32, []byte) error) error {
			return ix.b.Postings(func(t search.Trigram, l []byte) error { return add(t, l) })
		}}
	for k, i := range order {
		rec.Blobs[k], rec.Blocks[k], rec.Packed[k] = ix.ids[i], ix.blocks[i], ix.packed[i]
	}
	if _, err := ix.s.ix.AddSearchSegment(ctx, rec); err != nil {
		return err
	}
	if len(ix.ids) > 0 {
		ix.res.Segments++
	}
	ix.res.Blobs += int64(len(ix.ids))
	ix.res.Bytes += ix.text
	ix.res.Empty += int64(len(ix.empty))
	ix.ids, ix.blocks, ix.packed, ix.empty, ix.text = ix.ids[:0], ix.blocks[:0], ix.packed[:0], ix.empty[:0], 0
	ix.b = search.NewBuilder()
	return nil
}

// addTrigrams reads a blob, checked against its digest, adding its
// trigrams to ex, and returns its size and whether it is text (no NUL
// byte). A blob that fails leaves some of its trigrams in ex: a posting
// may only ever say "maybe".
func (s *Store) addTrigrams(ctx context.Context, ub index.UnsearchedBlob, ex *search.Extractor, buf []byte) (int64, bool, error) {
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
	drop, err := s.segmentsToDrop(ctx, catchUp)
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

// reclaimIndex gives the index database's free pages back to the file
// system after gc or pack: without it, a store's index stays as large as
// the search index ever was before a pack (its segments of loose blobs,
// dropped once their blobs are packed and indexed again, are the most of
// it). It is best effort: pages it leaves are reused by later writes.
func (s *Store) reclaimIndex(ctx context.Context) int64 {
	if s.readOnly {
		return 0
	}
	n, _ := s.ix.ReclaimFree(ctx)
	return n
}

// Segments a gc or pack drops: one whose live blobs are fewer than half of
// those it lists; after a pack, one of which more than half the blobs were
// loose when it was made and are packed now (so that they are indexed
// again frame by frame); and, when at least smallSegments segments are
// under a quarter of a full one, those.
const smallSegments = 8

func (s *Store) segmentsToDrop(ctx context.Context, afterPack bool) ([]int64, error) {
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
		n := int64(sg.N)
		l := live[sg.ID]
		switch {
		case 2*l.Live < n:
			drop = append(drop, sg.ID)
		case afterPack && 2*(l.Packed-sg.Packed) > n:
			drop = append(drop, sg.ID)
		case sg.NBlocks < segmentBlocks/4 && sg.Bytes < segmentBytes/4:
			small = append(small, sg.ID)
		}
	}
	if len(small) >= smallSegments {
		drop = append(drop, small...)
	}
	return drop, nil
}
