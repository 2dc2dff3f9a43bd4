package scenario

import (
	"math/rand/v2"
	"sync"
	"time"
)

// SeededJitter returns a lag jitter uniform in [0, max) from seed, safe for
// the concurrent calls of racetest.LagOptions.Jitter.
func SeededJitter(seed uint64, max time.Duration) func() time.Duration {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() time.Duration {
		if max <= 0 {
			return 0
		}
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(rng.Int64N(int64(max)))
	}
}
