// Package createfromlist defines an Analyzer that reports a child created
// with generateName from a decision taken on a cached List.
//
// # Analyzer createfromlist
//
// createfromlist: report generateName creates decided from a cached List without expectations
//
// A controller Lists its children from the informer cache and creates one
// when the List shows none. Its own last Create may not be in the cache
// yet: the List shows no child, and a second one is created. With
// generateName the server cannot refuse the duplicate (a fixed name would
// get AlreadyExists). kube-controller-manager's ReplicaSet controller keeps
// ControllerExpectations for this; racesafe's OwnerTracker and its drop-in
// Client (wire.ControllerManagedBy) do the same for any controller.
//
// Reported: a Create of an object whose generateName is set in the same
// function, after a List of the same kind from the cache in that function
// or in a helper it calls (followed across packages), in a package that
// uses no expectations (racesafe's expectations, kube's
// ControllerExpectations). Not reported: Lists through the API reader, and
// reads and writes through racesafe's Client.
package createfromlist
