package etcdcatalog

import "strings"

const (
	checkpointSuffix = "/consume-checkpoint"
	ownerSuffix      = "/owner"
	releasedSuffix   = "/released"
)

// keys builds every key the catalog uses, so that the layout is written down
// in one place:
//
//	<prefix>/wal/<pchannel>/consume-checkpoint   the stored record
//	<prefix>/wal/<pchannel>/owner                the owner, bound to its lease
//	<prefix>/wal/<pchannel>/released             written by each release
//
// The suffixes differ, so no pchannel name makes one key collide with
// another kind.
type keys struct{ prefix string }

// pchannels is the range prefix holding every pchannel's keys.
func (k keys) pchannels() string { return k.prefix + "/wal/" }

func (k keys) checkpoint(pchannel string) string {
	return k.pchannels() + pchannel + checkpointSuffix
}

func (k keys) owner(pchannel string) string { return k.pchannels() + pchannel + ownerSuffix }

// released is the key each release of pchannel's owner key writes, whose
// revision a claim compares (Catalog.claim).
func (k keys) released(pchannel string) string {
	return k.pchannels() + pchannel + releasedSuffix
}

// pchannelOf returns the pchannel whose checkpoint key is key, and false for
// any other key. The name may be empty: no lowwater writer puts a record at
// <prefix>/wal//consume-checkpoint, but a hand or another tool may, and
// Inspect must show what is there.
func (k keys) pchannelOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.pchannels())
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, checkpointSuffix)
}

// pchannelOfOwner returns the pchannel whose owner key is key, and false
// for any other key. No checkpoint key ends as an owner key does, whatever
// the pchannel's name ("p/owner" has <prefix>/wal/p/owner/consume-checkpoint).
func (k keys) pchannelOfOwner(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.pchannels())
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, ownerSuffix)
}

// stray returns key itself when it lies under pchannels() and is none of
// the keys the layout has, and false for any other key.
func (k keys) stray(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.pchannels())
	if !ok {
		return "", false
	}
	for _, suffix := range []string{checkpointSuffix, ownerSuffix, releasedSuffix} {
		if strings.HasSuffix(rest, suffix) {
			return "", false
		}
	}
	return key, true
}
