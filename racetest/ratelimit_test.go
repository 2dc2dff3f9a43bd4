package racetest_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/racesafe/racesafe/racetest"
)

func restClient(t *testing.T, cfg *rest.Config) *rest.RESTClient {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.APIPath = "/api"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatalf("RESTClientFor: %v", err)
	}
	return rc
}

func TestWithoutRateLimitSendsAtOnce(t *testing.T) {
	tests := []struct {
		name string
		cfg  *rest.Config
	}{
		{"QPS 0 (client-go default)", &rest.Config{Host: "https://example.invalid"}},
		{"explicit QPS", &rest.Config{Host: "https://example.invalid", QPS: 20, Burst: 30}},
		{"explicit limiter", &rest.Config{Host: "https://example.invalid",
			RateLimiter: flowcontrol.NewTokenBucketRateLimiter(1, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if rl := restClient(t, tt.cfg).GetRateLimiter(); rl == nil {
				t.Fatal("the original config has no rate limiter; the case proves nothing")
			}
			before := *tt.cfg
			got := racetest.WithoutRateLimit(tt.cfg)
			if rl := restClient(t, got).GetRateLimiter(); rl != nil {
				t.Errorf("a client from WithoutRateLimit has a rate limiter (QPS %v)", rl.QPS())
			}
			if tt.cfg.QPS != before.QPS || tt.cfg.Burst != before.Burst || tt.cfg.RateLimiter != before.RateLimiter {
				t.Errorf("WithoutRateLimit modified its argument: QPS %v, Burst %v", tt.cfg.QPS, tt.cfg.Burst)
			}
			if got.Host != tt.cfg.Host {
				t.Errorf("copy has Host %q, want %q", got.Host, tt.cfg.Host)
			}
		})
	}
}

// The doc's claim about the default: QPS 0 means client-go's 5 QPS.
func TestZeroQPSMeansClientGoDefault(t *testing.T) {
	rl := restClient(t, &rest.Config{Host: "https://example.invalid"}).GetRateLimiter()
	if rl == nil || rl.QPS() != rest.DefaultQPS {
		t.Fatalf("rate limiter of a QPS-0 config = %v, want %v QPS", rl, rest.DefaultQPS)
	}
}
