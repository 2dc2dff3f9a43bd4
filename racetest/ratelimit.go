package racetest

import "k8s.io/client-go/rest"

// WithoutRateLimit returns a copy of cfg with client-go's client-side rate
// limit turned off: QPS is negative and RateLimiter nil, so clients built from
// the copy send each request at once. cfg itself is not modified; it must not
// be nil.
//
// A rest.Config whose QPS is 0 gets client-go's default limit of
// rest.DefaultQPS (5) requests per second with a burst of rest.DefaultBurst
// (10), per client. A burst of reconciles then waits on that token bucket,
// not on the API server or the controller under test, and every controller
// measured looks alike. envtest's own config allows 1000 QPS (burst 2000)
// and ctrl.GetConfig turns the limit off; a config built another way, or one
// given an explicit QPS, keeps its limit until it goes through here.
func WithoutRateLimit(cfg *rest.Config) *rest.Config {
	unlimited := rest.CopyConfig(cfg)
	unlimited.QPS = -1
	unlimited.RateLimiter = nil
	return unlimited
}
