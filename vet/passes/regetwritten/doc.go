// Package regetwritten defines an Analyzer that reports the incident's
// stale re-read: a Get from the informer cache into an object that the same
// reconcile has already written.
//
// # Analyzer regetwritten
//
// regetwritten: report cached Gets into an object this reconcile wrote
//
// A controller writes an object (status.phase = Deleting) and keeps the
// server's answer in its pointer. If it, or a helper it calls, then Gets the
// object from the informer cache into the same pointer, the cache may not
// have seen the write yet: the pointer goes back to the object as it was
// before (Failed), and what the reconcile decides next is decided on that.
// The checker follows helpers within and across packages: a function that
// Gets into a pointer parameter from the cache (the post-mortem's
// updateStatus) is reported where it is called with a pointer the caller
// already wrote.
//
// A helper's parameter counts whether it is a pointer or an interface
// (obj client.Object). A write is an Update, Patch or Apply of the object
// or a subresource; a Create is not, since after it there is no older copy
// for the cache to put back.
//
// Not reported: a Get into a fresh variable; a Get through the API reader
// (mgr.GetAPIReader(), client.New, or a field assigned one); a read through
// racesafe's expectations.Client or Reader, which serve their own writes; a
// Get whose object's resourceVersion is compared afterwards; a Get on the
// path where the write failed (if err := c.Update(ctx, x); err != nil); a
// Get under a test that the object's UID or resourceVersion is empty, which
// fills in an object the server has not answered a write for; a write in a
// closure stored for later, or deferred, before the Get.
//
// Suggested fix, for a direct Get whose object's type the file can name
// and where the name latest is free: declare latest := &T{} before the
// statement and Get into it, so the written object keeps what the write
// returned.
package regetwritten
