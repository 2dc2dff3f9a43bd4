package statusupdate

import "testing"

// Adding the precondition must not touch the rest of the patch: an int64 past
// 2^53 would be rounded by a float64 round trip.
func TestWithResourceVersionKeepsPatchExact(t *testing.T) {
	for _, tc := range []struct{ patch, want string }{
		{`{"status":{"observedGeneration":9007199254740993}}`,
			`{"metadata":{"resourceVersion":"42"},"status":{"observedGeneration":9007199254740993}}`},
		{`{"metadata":{"labels":{"a":"b"},"resourceVersion":"7"}}`,
			`{"metadata":{"labels":{"a":"b"},"resourceVersion":"42"}}`},
	} {
		got, err := withResourceVersion([]byte(tc.patch), "42")
		if err != nil {
			t.Fatalf("withResourceVersion(%s): %v", tc.patch, err)
		}
		if string(got) != tc.want {
			t.Errorf("withResourceVersion(%s) = %s, want %s", tc.patch, got, tc.want)
		}
	}
}
