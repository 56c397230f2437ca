// Package wal holds the message IDs of the write-ahead logs lowwater tracks.
//
// A MessageID is a position in one WAL, totally ordered within that WAL and
// not comparable across WALs: a Kafka offset says nothing about a Pulsar
// ledger. Callers that accept IDs from outside must call Check first; the
// comparison methods assume both sides come from the same WAL and never
// panic when they do not (they report false), so an unchecked mix is a logic
// error that goes unnoticed rather than a crash. lowwater's actors reject such
// IDs at the door with ErrWALMismatch.
//
// A WAL is known by the codec registered for it (Register): the four
// built-in ones are registered at init, others by the program that uses
// them. The registry is the package's one piece of global state, written
// at program start and read without a lock afterwards. Everything else is
// pure: no goroutines, no I/O.
package wal
