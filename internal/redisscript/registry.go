package redisscript

// BucketRegistry returns the set of the names of the plain (not keyed)
// buckets whose hash the sync worker may have written: "<prefix>buckets".
// The worker adds a name before it writes the hash and removes it after
// the hash is gone, so the set holds every worker-written bucket hash
// (and perhaps a few names whose hash is already gone). Its reconcile
// reads this set instead of scanning the keyspace, whose size grows with
// the key states of keyed buckets. Only the worker reads it.
func (ks Keyspace) BucketRegistry() string { return ks.prefix() + "buckets" }
