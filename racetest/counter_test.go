package racetest_test

import (
	"net/url"
	"testing"

	"github.com/racesafe/racesafe/racetest"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, url string
		want        racetest.Request
	}{
		{"GET", "/api/v1/namespaces/default/pods/p", racetest.Request{Verb: "get", Resource: "pods"}},
		{"HEAD", "/api/v1/namespaces/default/pods/p", racetest.Request{Verb: "get", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/default/pods", racetest.Request{Verb: "list", Resource: "pods"}},
		{"GET", "/api/v1/pods?limit=500", racetest.Request{Verb: "list", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/default/pods?watch=true&resourceVersion=5", racetest.Request{Verb: "watch", Resource: "pods"}},
		{"GET", "/api/v1/pods?watch=1", racetest.Request{Verb: "watch", Resource: "pods"}},
		{"GET", "/api/v1/pods?watch=false", racetest.Request{Verb: "list", Resource: "pods"}},
		{"GET", "/api/v1/watch/namespaces/default/pods", racetest.Request{Verb: "watch", Resource: "pods"}},
		{"GET", "/api/v1/watch/namespaces/default/pods/p", racetest.Request{Verb: "watch", Resource: "pods"}},
		{"POST", "/api/v1/namespaces/default/pods", racetest.Request{Verb: "create", Resource: "pods"}},
		{"POST", "/api/v1/namespaces/default/pods/p/eviction", racetest.Request{Verb: "create", Resource: "pods/eviction"}},
		{"PUT", "/api/v1/namespaces/default/pods/p", racetest.Request{Verb: "update", Resource: "pods"}},
		{"PUT", "/api/v1/namespaces/default/pods/p/status", racetest.Request{Verb: "update", Resource: "pods/status"}},
		{"PATCH", "/apis/racesafe.io/v1alpha1/namespaces/ns/workitems/w/status", racetest.Request{Verb: "patch", Resource: "workitems/status"}},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", racetest.Request{Verb: "patch", Resource: "deployments/scale"}},
		{"DELETE", "/apis/apps/v1/namespaces/ns/deployments/d", racetest.Request{Verb: "delete", Resource: "deployments"}},
		{"DELETE", "/apis/apps/v1/namespaces/ns/deployments", racetest.Request{Verb: "deletecollection", Resource: "deployments"}},
		{"GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x", racetest.Request{Verb: "get", Resource: "customresourcedefinitions"}},
		{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles?watch=true", racetest.Request{Verb: "watch", Resource: "clusterroles"}},
		// The namespace itself, and its own subresources.
		{"GET", "/api/v1/namespaces", racetest.Request{Verb: "list", Resource: "namespaces"}},
		{"GET", "/api/v1/namespaces/default", racetest.Request{Verb: "get", Resource: "namespaces"}},
		{"PUT", "/api/v1/namespaces/default/status", racetest.Request{Verb: "update", Resource: "namespaces/status"}},
		{"PUT", "/api/v1/namespaces/default/finalize", racetest.Request{Verb: "update", Resource: "namespaces/finalize"}},
		{"GET", "/api/v1/namespaces/default/configmaps", racetest.Request{Verb: "list", Resource: "configmaps"}},
		// Cluster-scoped objects and their subresources.
		{"PATCH", "/api/v1/nodes/n1/status", racetest.Request{Verb: "patch", Resource: "nodes/status"}},
		{"GET", "/api/v1/proxy/nodes/n1/stats/summary", racetest.Request{Verb: "proxy", Resource: "nodes"}},
		{"GET", "/api/v1/namespaces/default/pods/p/log?follow=true", racetest.Request{Verb: "get", Resource: "pods/log"}},
		// Discovery and other non-resource paths.
		{"GET", "/api", racetest.Request{Verb: "get", Path: "/api"}},
		{"GET", "/api/v1", racetest.Request{Verb: "get", Path: "/api/v1"}},
		{"GET", "/apis", racetest.Request{Verb: "get", Path: "/apis"}},
		{"GET", "/apis/apps", racetest.Request{Verb: "get", Path: "/apis/apps"}},
		{"GET", "/apis/apps/v1", racetest.Request{Verb: "get", Path: "/apis/apps/v1"}},
		{"GET", "/version", racetest.Request{Verb: "get", Path: "/version"}},
		{"GET", "/openapi/v3", racetest.Request{Verb: "get", Path: "/openapi/v3"}},
		{"GET", "/api/v1/watch", racetest.Request{Verb: "get", Path: "/api/v1/watch"}},
		{"POST", "/", racetest.Request{Verb: "post", Path: "/"}},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := racetest.Classify(tc.method, u); got != tc.want {
			t.Errorf("Classify(%s %s) = %+v, want %+v", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestCounterZeroValue(t *testing.T) {
	var c racetest.Counter
	if c.Total() != 0 || c.Count("get", "pods") != 0 || len(c.Snapshot()) != 0 {
		t.Fatalf("zero Counter is not empty: %v", c.Snapshot())
	}
	c.Reset()
}
