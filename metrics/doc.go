// Package metrics exports lowwater's checkpoint flow as Prometheus metrics.
//
// A Collector is fed from two places, and needs both:
//
//   - the events the pchannel actors publish (Recovered, CheckpointPersisted,
//     PersistFailed, CommandRejected, ...), taken off the actors' goroutines
//     by Subscribe through package events, so that a slow scrape never slows
//     a pchannel; and
//   - an actors.Counters per pchannel (Counters, given to the actor with
//     actors.WithCounters) for what no event carries: the updates accepted,
//     and whether a save is in flight. The actor adds to them atomically,
//     without allocating.
//
// Wiring, for each node:
//
//	collector, _ := metrics.New()
//	registry.MustRegister(collector)
//	sub, _ := collector.Subscribe(system.EventStream)
//	defer sub.Close()
//	counters := actors.WithCounters(collector.Counters(name))
//	props, _ := actors.NewProps(name, wal.Kafka, catalog, counters)
//
// The series, all prefixed lowwater_ (c counter, g gauge, h histogram):
//
//	updates_total             c  checkpoint updates accepted (an equal one too)
//	commands_rejected_total   c  by reason: exists, not_found, rollback,
//	                             nil_checkpoint, empty_vchannel,
//	                             wal_mismatch, other (the rest: a
//	                             sentinel, a nil command, one sent by
//	                             value, a name no catalog stores)
//	vchannels_added_total     c
//	vchannels_added_behind_total
//	                          c  added below the persisted checkpoint,
//	                             where a restart starts, past their
//	                             records (AddedBehind)
//	vchannels_dropped_total   c
//	minimum_advances_total    c  the low-water mark rose (MinimumAdvanced:
//	                             once for a run of sent updates)
//	saves_total               c  checkpoints the catalog acknowledged
//	save_failures_total       c  failed attempts by reason: timeout (an
//	                             attempt still running past its deadline
//	                             too, once), stored_ahead, fenced,
//	                             closed, canceled, error (a catalog's
//	                             panic too, whatever its value)
//	save_latency_seconds      h  of successful saves
//	persist_lag_seconds       g  since the minimum rose past the persisted
//	                             checkpoint: the age of the oldest rise
//	                             not saved, what a crash would replay
//	                             (max over pchannels)
//	minimum_age_seconds       g  since the minimum last rose, or the
//	                             pchannel began running (max over them)
//	pchannels_stalled         g  whose minimum stalled
//	                             (actors.WithStallAfter), unmoved since
//	minimum_stalls_total      c  MinimumStalled events
//	saves_in_flight           g  catalog saves running now
//	abandoned_calls_total     c  catalog calls a stop or restart
//	                             abandoned (they ignored their context)
//	subscriber_panics_total   c  events an event-stream subscriber
//	                             panicked on (those after it missed them)
//	pchannels                 g  pchannels running on this node
//	pchannels_recovering      g  still reading their stored checkpoint
//	                             after a failed read: the events tell
//	                             (a first read still running is in
//	                             neither gauge until it fails or
//	                             overruns its save timeout)
//	pchannels_retrying        g  whose last save failed and waits for its
//	                             retry on the backoff: not one stored
//	                             ahead whose value was adopted, nor a
//	                             fenced one, nor one still running (a
//	                             stored_ahead that proves nothing is
//	                             retried, and counts)
//	recovery_failures_total   c  failed reads of the stored checkpoint,
//	                             one per attempt, as save_failures_total
//	persister_restarts_total  c  persisters restarted after a panic
//	ownership_lost_total      c
//	events_dropped_total      c  events the subscription dropped: the
//	                             metrics above missed them
//
// Labels stay bounded: reason takes the values listed, and the pchannel
// label is added to every series but events_dropped_total (the
// subscription's, not a pchannel's) only with WithPChannelLabel, for
// deployments whose pchannels are few and fixed. Without it every series is
// a total over the node's pchannels (the lag: the largest).
//
// The age of the minimum costs nothing per update: the collector keeps the
// time of the last MinimumAdvanced (or Recovered, if later) and subtracts
// it at scrape time, so it equals now minus messages.State.HeldSince. It
// grows on a pchannel with no vchannel too (nothing rises there);
// pchannels_stalled, fed by MinimumStalled and MinimumResumed, tells a
// stall from an idle pchannel, and is 0 with stall detection off. Both are
// 0 once a pchannel stopped, and go with Forget like every series of it.
//
// Counting from events that a lagging subscription dropped is approximate;
// events_dropped_total says by how much. The counters themselves
// (updates_total, saves_in_flight, abandoned_calls_total,
// subscriber_panics_total) are exact.
package metrics
