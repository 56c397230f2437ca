package actors

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
)

// directory lists the pchannel actors of one actor system by PID: what a
// caller needs to know of a pchannel without asking it. Asked, a pchannel
// answers behind every message its mailbox holds, a backlog of raw Sends
// or a subscriber that holds it; Poison, which asked first, sent nothing
// when its context ended before the answer, and the pchannel ran on, on a
// catalog its caller then closed.
//
// A pchannel is listed as protoactor registers its mailbox, before Spawn
// returns, and delisted as it stops. A listing is believed only for the
// PID Spawn returned, while the process registry holds the same process
// under it: a later actor spawned under a stopped one's name is never
// taken for it. A pchannel on a mailbox of the caller's own
// (actor.WithMailbox), or asked through a PID made anew, is not known
// here, and is asked as before.
type directory struct {
	mu     sync.Mutex
	listed map[string]*listing // by PID id; guarded by mu
}

// listing is one pchannel actor, shared by its incarnations.
type listing struct {
	dir *directory
	// pid is the PID protoactor made for the actor, which Spawn returned
	// and ctx.Self() gives: another system's PID of the same id, whose
	// sends go to that system's actor, is never taken for it.
	pid     *actor.PID
	process actor.Process
	mailbox *mailbox
	name    string
	// stopping is set once the actor began to stop: its mailbox refuses
	// what is sent to it from then on.
	stopping atomic.Bool
}

// directoryExtension keeps a system's directory among its extensions.
var directoryExtension = extensions.NextExtensionID()

func (d *directory) ExtensionID() extensions.ExtensionID { return directoryExtension }

// directoryOf returns the directory of sys, made on first use.
func directoryOf(sys *actor.ActorSystem) *directory {
	poolsMu.Lock() // the extension registry is not safe for concurrent use
	defer poolsMu.Unlock()
	if d, ok := sys.Extensions.Get(directoryExtension).(*directory); ok {
		return d
	}
	d := &directory{listed: make(map[string]*listing)}
	sys.Extensions.Register(d)
	return d
}

// list lists the pchannel name on m under pid, and returns its listing:
// the one listed already for its earlier incarnations, or nil if pid is
// not in the registry (the actor stopped).
func (d *directory) list(sys *actor.ActorSystem, pid *actor.PID, m *mailbox, name string) *listing {
	proc, ok := sys.ProcessRegistry.Get(pid)
	if !ok {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if l := d.listed[pid.Id]; l != nil && l.mailbox == m {
		return l
	}
	l := &listing{dir: d, pid: pid, process: proc, mailbox: m, name: name}
	d.listed[pid.Id] = l
	return l
}

// delist forgets l, the listing of pid, unless another actor has taken
// pid since.
func (l *listing) delist(pid *actor.PID) {
	l.dir.mu.Lock()
	defer l.dir.mu.Unlock()
	if l.dir.listed[pid.Id] == l {
		delete(l.dir.listed, pid.Id)
	}
}

// lookupID returns the listing of the live pchannel actor of pid's id in
// sys, whatever PID value it is given as: one made anew (actor.NewPID)
// too, whose sends may yet go to another system's actor of that id, if
// the PID was sent to it first (see lookup).
func (d *directory) lookupID(sys *actor.ActorSystem, pid *actor.PID) *listing {
	proc, ok := sys.ProcessRegistry.Get(pid)
	if !ok {
		return nil
	}
	d.mu.Lock()
	l := d.listed[pid.Id]
	d.mu.Unlock()
	if l == nil || l.process != proc {
		return nil
	}
	return l
}

// lookup returns the listing of the pchannel actor at pid, or nil if
// none is live there that the directory knows. pid must be the one
// protoactor made for it: a PID made anew (actor.NewPID), or another
// system's of the same id, is not known here, since a PID remembers the
// process it was first sent to, which may be another system's.
func (d *directory) lookup(sys *actor.ActorSystem, pid *actor.PID) *listing {
	if l := d.lookupID(sys, pid); l != nil && l.pid == pid {
		return l
	}
	return nil
}
