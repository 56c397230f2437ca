// Package kafka is lowwater behind a real Kafka client: a consumer node
// that reads a topic with franz-go (kgo), processes it with many workers
// that flush at their own pace, and resumes after a crash where it may,
// losing nothing. Read it top to bottom: doc.go, node.go, worker.go,
// sink.go, then naive.go for the usual way, which loses records.
//
// # The mapping
//
//   - A partition is a pchannel: one actor (actors.NewProps with wal.Kafka)
//     keeps its checkpoint, saved to a bbolt catalog (or any other, such as
//     etcd: Config.Catalog).
//   - The records of a partition are split by key (VChannelOf: a hash of
//     the key into 16) into vchannels. Each vchannel has its own worker,
//     which buffers its records and writes them to the Sink every so often,
//     some workers much more slowly than others.
//   - After each flush a worker reports its vchannel's checkpoint as a
//     wal.KafkaID; the actor saves the minimum over the partition's
//     vchannels, the low-water mark.
//
// # What a checkpoint means
//
// A checkpoint is Kafka's committed offset: the next offset to read, not
// the last one processed. Checkpoint c for a vchannel says that every
// record of that vchannel with an offset below c is in the sink; for a
// partition, that every record below c is. So a node seeks each partition
// to exactly its stored checkpoint (kgo.NewOffset().At(c)), and a partition
// never seen starts at offset 0, the checkpoint of "nothing processed".
//
// A worker's checkpoint is where the partition's reader got, not the
// offset after its own last record: the reader marks every worker after
// each fetch, so a vchannel with no records of late still advances and
// does not hold the partition back. A worker reports only after its write
// to the sink returned: a crash between the two replays, never loses.
//
// # What a crash costs
//
// After a SIGKILL the node restarts from the stored checkpoint c of each
// partition. Nothing is lost: lowwater only stores a minimum every worker
// had reported, and workers report only flushed records. What is replayed
// is the records at or above c that were already in the sink when the
// node died; cmd/kafkademo checks, per partition and kill, from the sink
// and the catalog as the dead node left them:
//
//	lost   = #{ records below c not in the sink }               must be 0
//	bound  = #{ records in the sink with offset >= c }
//	replay = #{ records of the bound written again after the restart }
//	                                                     must be <= bound
//
// The bound splits at m, the offset of the first record not in the sink,
// where the slowest vchannel stands:
//
//	lag    = #{ in the sink, c <= offset < m }
//	spread = #{ in the sink, offset >= m }
//
// The spread is the price of one checkpoint per partition: faster
// vchannels flushed past the slowest one. The lag is the price of keeping
// it asynchronously: the slowest worker reported where the reader had got
// at its last flush, and the others' records since then, up to its next
// own one, are in the sink above it; or the actor had not yet saved the
// new minimum when the node died. Replay equals the bound unless the next
// run died before flushing all of it again.
//
// Duplicates are therefore bounded by how far the fastest vchannels run
// ahead of the slowest, not by how long the node ran: flush the slow ones
// more often and the replay shrinks with them.
//
// # A topic made again
//
// Offsets alone hold the node's place, and a topic deleted and made again
// numbers its records from 0 again. The node reads nothing under a
// checkpoint that describes another log: one past a partition's end stops
// Run before it reads (ErrPastEnd), and the topic's ID changing under it,
// or the brokers losing records it had read, ends Run (ErrTopicReplaced).
// Records deleted by retention before the node processed them are lost
// to it whatever it does: it warns, and reads from the log's start.
//
// # Partitions added
//
// Kafka adds partitions to a topic, never removes one. Config.Partitions
// is the count when the node starts; Run asks the brokers for more every
// Config.PartitionCheck and reads each one added by a pchannel of its
// own, from offset 0. A checkpoint stored for such a partition was stored
// for a partition the topic did not have when the node started, so for an
// earlier topic of the name: it ends the node (ErrStaleCheckpoint), where
// offsets alone could not tell it from a checkpoint of this topic.
package kafka
