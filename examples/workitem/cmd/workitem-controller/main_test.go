package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/racesafe/racesafe/internal/testenv"
)

func TestMain(m *testing.M) {
	// Informers list, then watch, as they do against API servers without
	// streaming lists: the RBAC test then proves the list verbs too. With
	// WatchListClient, informers of a 1.37 API server open one watch and
	// need no list: a role missing list would pass here and fail on an
	// older cluster. client-go reads this once, before the first informer.
	if err := os.Setenv("KUBE_FEATURE_WatchListClient", "false"); err != nil {
		panic(err)
	}
	// What is not the tests' to stop: testenv.LeakOptions.
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}
