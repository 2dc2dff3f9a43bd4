package racetest

import "context"

// shrink reduces ops, whose run h broke rule at v, to a shorter list that
// still breaks it, by delta debugging: it drops the operations after v's,
// then ever smaller chunks, and keeps a smaller list whenever a rerun of it
// (the same seed, a namespace and a manager of its own) still breaks rule.
// It spends at most budget reruns; a timing-dependent violation may need
// several.
func (env *checkEnv) shrink(ctx context.Context, seed uint64, ops []Op, h *historyResult, rule Rule, v Violation, budget int) (Reproducer, error) {
	best := Reproducer{Seed: seed, Records: h.Records, Violation: v}
	if budget == 0 {
		return best, nil
	}
	fails := func(cand []Op) (bool, error) {
		if budget == 0 {
			return false, nil
		}
		budget--
		rh, err := env.runHistory(ctx, seed, cand)
		if err != nil {
			return false, err
		}
		if w, ok := first(rh.Violations, rule); ok {
			best = Reproducer{Seed: seed, Only: indexes(cand), Records: rh.Records, Violation: w}
			return true, nil
		}
		return false, nil
	}
	cur := ops
	for i, op := range ops {
		if op.Index == v.Op && i+1 < len(ops) {
			ok, err := fails(ops[:i+1])
			if err != nil {
				return best, err
			}
			if ok {
				cur = ops[:i+1]
			}
			break
		}
	}
	n := 2
	for len(cur) >= 2 && budget > 0 {
		size := (len(cur) + n - 1) / n
		reduced := false
		for start := 0; start < len(cur) && budget > 0; start += size {
			cand := append(append([]Op(nil), cur[:start]...), cur[min(start+size, len(cur)):]...)
			ok, err := fails(cand)
			if err != nil {
				return best, err
			}
			if ok {
				cur, n, reduced = cand, max(n-1, 2), true
				break
			}
		}
		if !reduced {
			if n >= len(cur) {
				break
			}
			n = min(2*n, len(cur))
		}
	}
	return best, nil
}

func indexes(ops []Op) []int {
	out := make([]int, len(ops))
	for i, op := range ops {
		out[i] = op.Index
	}
	return out
}
