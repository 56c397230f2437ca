// Package etcdcatalog is a persistence.Catalog on etcd, for deployments that
// spread pchannels over several machines.
//
// # Keys and records
//
// A checkpoint lives at <prefix>/wal/<pchannel>/consume-checkpoint and holds a
// persistence.Record (versioned, checksummed, self-describing). The owner of a
// pchannel, when ownership is used, is <prefix>/wal/<pchannel>/owner. Any
// other key under <prefix>/wal/ was put there by something else, and the
// catalog neither reads nor removes it; StrayKeys lists them. The
// prefix defaults to "lowwater" (WithPrefix). One etcd cluster can serve many
// deployments side by side, each under its own prefix, provided no prefix
// lies under another's "<prefix>/wal/": "lowwater/wal/tenant-b" would put
// its records among the pchannels of "lowwater", and LoadAll there would
// read them (and fail on one it cannot decode). WithPrefix refuses a
// prefix that could (ValidatePrefix). Siblings such as "tenant-a" and
// "tenant-b", or nested ones such as "lowwater/tenant-b", are safe.
//
// # Saves never go backward
//
// Save is a compare-and-swap: it writes only when nothing is stored, or when
// the stored checkpoint is below the offered one and has not changed since it
// was read (its stored bytes compared, inside the writing transaction: not
// its mod revision, which etcd reuses after its data is wiped or an old
// snapshot restored). Saving the stored value again succeeds; a lower value
// is refused with a *persistence.StoredAheadError and nothing is written.
// With a single writer a save costs one round trip: the catalog remembers
// the last record it read or wrote, and only a stale memory costs a second
// one, after which the memory is replaced.
//
// The compare carries the stored record, so a save's request holds two
// records: etcd refuses it ("request is too large") when they pass its
// --max-request-bytes (1.5 MiB by default). A record is at most about 66
// KiB (an ID of wal.MaxIDLen, a name of persistence.MaxNameLen), so only a
// cluster whose limit is lowered below about 140 KiB meets it: a record
// stored there once may never be raised.
//
// # Ownership and fencing
//
// Own (or TryOwn) makes a concurrency.Session the owner of one pchannel: a key
// bound to the session's lease, created in one transaction. Its create
// revision is the owner's term, larger for every new owner. The returned
// *Owned is a persistence.Catalog for that pchannel alone: every save is
// conditioned, in its transaction, on the owner key still carrying that term
// and that lease, and stores the term in the record; a stored record with a
// higher term also refuses it. The lease matters once etcd's data has been
// wiped or restored from a backup: revisions, and so terms, are handed out
// again, and a stale owner may hold the very term of the new one. A writer that lost ownership gets an error wrapping
// persistence.ErrFenced (a *FencedError) and nothing is written, so two nodes
// that both believe they own a pchannel cannot both write it, nor regress it.
// Owned.Done is closed as soon as ownership is known lost (session ended,
// owner key deleted or replaced, a fenced save, Release).
//
// Every call honours its context: a deadline bounds the call, so an etcd
// leader change or an unreachable cluster costs the caller one attempt.
package etcdcatalog
