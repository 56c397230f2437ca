// Package persistence stores pchannel consume checkpoints durably.
//
// Catalog is the contract every store meets; Memory serves tests, Bolt (one
// bbolt file) is the embedded default, and the etcd catalog lives in its own
// package for deployments that share pchannels across machines. Every store
// refuses to lower a checkpoint inside its own write, so that no writer,
// stale or confused, can regress one: the safety of lowwater does not rest on
// its callers alone.
package persistence
