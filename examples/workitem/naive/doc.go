// Package naive is the WorkItem controller of the incident, as it was.
//
// It is the reproducer: do not copy it. Its reconcileDelete and updateStatus
// follow the post-mortem's code line for line:
//
//   - updateStatus runs r.Get(ctx, key, item) inside retry.RetryOnConflict
//     before every patch, so each status write first overwrites the caller's
//     item with whatever the informer cache holds;
//   - syncDryRunCondition goes through the same Get, and when the condition is
//     already in sync it writes nothing, so the stale snapshot stays in item;
//   - the switch then dispatches on item.Status.Phase, the field that Get just
//     rolled back to Failed, and its default branch returns ctrl.Result{}, nil.
//
// Under watch lag every delete that starts from Failed ends in that default
// branch; with GenerationChangedPredicate no status event wakes the item again,
// and it keeps its finalizer forever.
//
// Its install is a child ConfigMap (see EnsureChild), decided as operators
// commonly decide it: from a List of the cache, created when the List shows
// none. Under watch lag the install poll's requeue lists before the cache has
// seen the child the last reconcile created, and a second one is created.
// The uninstall deletes what the cached List shows.
//
// The post-mortem's two hand fixes are here too, as Variants, so benchmarks can
// measure them beside the racesafe controller in examples/workitem/reconciler.
package naive
