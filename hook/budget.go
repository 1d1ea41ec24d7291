package hook

import (
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/tokens"
)

// StepBudget is a hook's bound on what one step's results may take in
// context together (WithStepBudget).
type StepBudget struct {
	MaxTokens int
	Counter   tokens.Counter
}

// pick marks for offloading, largest first, the eligible results not yet
// picked until the results left in context come to at most MaxTokens.
func (b *StepBudget) pick(step Step, results []Result, eligible, picked []bool) {
	size := make([]int, len(results))
	total := 0
	for i, r := range results {
		if picked[i] {
			continue
		}
		size[i] = b.tokens(step, r)
		total += size[i]
	}
	for total > b.MaxTokens {
		largest := -1
		for i := range results {
			if eligible[i] && !picked[i] && (largest < 0 || size[i] > size[largest]) {
				largest = i
			}
		}
		if largest < 0 {
			return // what is left cannot be offloaded
		}
		picked[largest] = true
		total -= size[largest]
	}
}

// tokens returns what a result takes in context. A part kept outside
// memory (Source) is not read: its bytes stand for its tokens, which they
// bound.
func (b *StepBudget) tokens(step Step, r Result) int {
	for _, p := range r.Parts {
		if p.Source != nil {
			n := 0
			for _, p := range r.Parts {
				switch {
				case p.Kind == KindImage:
					n += policy.TokensPerImage
				case p.Kind == KindFile:
					n += policy.TokensPerFile
				case p.Source != nil:
					n += int(p.Source.Size)
				default:
					n += len(p.Text)
				}
			}
			return n
		}
	}
	return policy.SubjectTokens(subject(step, r), b.Counter, -1)
}
