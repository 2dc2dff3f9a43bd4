package racetest

import (
	"net/http"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// TestTransportsLetClientGoReachTheTransportUnderneath: every transport
// racetest puts on a rest.Config must unwrap, or
// utilnet.CloseIdleConnectionsFor cannot close the connections underneath
// and their goroutines outlive the test.
func TestTransportsLetClientGoReachTheTransportUnderneath(t *testing.T) {
	base := &http.Transport{}
	for name, rt := range map[string]http.RoundTripper{
		"counting":    &countingTransport{wrapping: wrapping{base}},
		"lag":         &lagTransport{wrapping: wrapping{base}},
		"gate":        &gateTransport{wrapping: wrapping{base}},
		"watchFaults": &watchFaultTransport{wrapping: wrapping{base}},
	} {
		w, ok := rt.(utilnet.RoundTripperWrapper)
		if !ok || w.WrappedRoundTripper() != base {
			t.Errorf("%s transport does not unwrap to the transport underneath", name)
		}
	}
}
