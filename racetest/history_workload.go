package racetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// CheckerTierLabel is the label a history's writes move objects in and out
// of selectors with; its values are "a", "b" or none. A subject's
// label-selected cache selects on it.
const CheckerTierLabel = "racesafe.io/tier"

const tierLabel = CheckerTierLabel

// checkerFinalizer is the finalizer a history's writes add and remove.
const checkerFinalizer = "racesafe.io/checker"

// weighted is one choice of a generator with its weight.
type weighted[T any] struct {
	w int
	v T
}

func pick[T any](r *rand.Rand, choices []weighted[T]) T {
	total := 0
	for _, c := range choices {
		total += c.w
	}
	n := r.IntN(total)
	for _, c := range choices {
		if n < c.w {
			return c.v
		}
		n -= c.w
	}
	return choices[len(choices)-1].v
}

var (
	subjectKinds = []weighted[OpKind]{
		{30, OpKindGet}, {14, OpKindList},
		{6, OpKindCreate}, {2, OpKindGenerateName}, {8, OpKindUpdate}, {8, OpKindMergePatch},
		{3, OpKindApply}, {4, OpKindStatusUpdate}, {4, OpKindStatusPatch}, {6, OpKindDelete},
		{1, OpKindDeleteAllOf}, {3, OpKindUnfinalize}, {3, OpKindPause},
	}
	otherKinds = []weighted[OpKind]{
		{4, OpKindCreate}, {5, OpKindUpdate}, {5, OpKindMergePatch}, {2, OpKindStatusUpdate},
		{4, OpKindDelete}, {1, OpKindDeleteAllOf}, {3, OpKindUnfinalize},
	}
	forms     = []weighted[Form]{{1, FormTyped}, {1, FormUnstructured}, {1, FormMetadata}}
	tiers     = []weighted[string]{{2, "a"}, {1, "b"}, {1, ""}}
	selectors = []weighted[string]{{2, ""}, {2, tierLabel + "=a"}, {1, tierLabel + "=b"}}
	propagate = []weighted[string]{{3, ""}, {1, "Orphan"}, {1, "Foreground"}, {1, "Background"}}
	precond   = []weighted[string]{{3, ""}, {1, "uid"}, {1, "rv"}}
)

// generate returns the operations of the history of seed: the subject's
// reads and writes interleaved with the other writer's, on a few names so
// that they collide. The same seed and options give the same operations.
func generate(seed uint64, o CheckOptions) []Op {
	r := rand.New(rand.NewPCG(seed, 0x72616365736166)) //nolint:gosec // a workload, not a secret
	ops := make([]Op, 0, o.Ops)
	for i := range o.Ops {
		op := Op{Index: i, Writer: WriterSubject, Namespace: r.IntN(o.Subject.Namespaces)}
		// One operation in four is the other writer's.
		if r.IntN(4) == 0 {
			op.Writer = WriterOther
			op.Kind = pick(r, otherKinds)
		} else {
			op.Kind = pick(r, subjectKinds)
		}
		op.Name = fmt.Sprintf("obj-%d", r.IntN(o.Objects))
		switch op.Kind {
		case OpKindGet:
			op.Form = pick(r, forms)
		case OpKindList:
			op.Form = pick(r, forms)
			op.Selector = pick(r, selectors)
		case OpKindDeleteAllOf:
			op.Selector = pick(r, selectors[1:])
		case OpKindPause:
			op.Pause = time.Duration(r.IntN(150)) * time.Millisecond
		case OpKindDelete:
			op.Precondition = pick(r, precond)
			op.Propagation = pick(r, propagate)
		case OpKindCreate, OpKindGenerateName, OpKindUpdate:
			op.Tier = pick(r, tiers)
			op.Finalizer = r.IntN(3) == 0
		case OpKindMergePatch:
			op.Tier = pick(r, tiers)
			if r.IntN(3) == 0 {
				op.Precondition = "rv"
			}
		case OpKindApply, OpKindStatusUpdate, OpKindStatusPatch:
			op.Tier = pick(r, tiers)
		}
		if op.Writer == WriterSubject && op.isWrite() {
			switch op.Kind {
			case OpKindCreate, OpKindUpdate, OpKindStatusUpdate:
				op.Form = pick(r, forms[:2])
			case OpKindMergePatch, OpKindDelete, OpKindUnfinalize:
				op.Form = pick(r, forms)
			}
			if op.Kind != OpKindDeleteAllOf && r.Float64() < o.Ambiguous {
				op.Ambiguous = true
			}
		}
		ops = append(ops, op)
	}
	if o.Only != nil {
		ops = slices.DeleteFunc(ops, func(op Op) bool { return !slices.Contains(o.Only, op.Index) })
	}
	return ops
}
