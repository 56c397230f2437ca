package persistence

import (
	"github.com/lowwater/lowwater/internal/shorten"

	"fmt"
	"unicode/utf8"
)

// MaxNameLen is the longest pchannel or vchannel name lowwater takes, in
// bytes. A pchannel name is a key in every catalog: bbolt refuses keys over
// 32 KiB and etcd keys share a request limit (1.5 MiB by default) with the
// record, so a name that passed and then failed every save would be retried
// forever. 512 bytes fits both with room for prefixes, and is far above any
// real channel name.
const MaxNameLen = 512

// ValidatePChannel reports a pchannel name that no catalog can store: empty,
// longer than MaxNameLen bytes, not valid UTF-8, or holding a NUL byte. The
// error wraps ErrInvalidArgument.
func ValidatePChannel(name string) error { return validateName("pchannel", name) }

// ValidateVChannel reports a vchannel name lowwater does not take, by the
// same rules as ValidatePChannel. The error wraps ErrInvalidArgument.
func ValidateVChannel(name string) error { return validateName("vchannel", name) }

func validateName(kind, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty %s name", ErrInvalidArgument, kind)
	}
	var why string
	switch {
	case len(name) > MaxNameLen:
		why = fmt.Sprintf("is over the %d-byte limit", MaxNameLen)
	case !utf8.ValidString(name):
		why = "is not valid UTF-8"
	default:
		for i := 0; i < len(name); i++ {
			if name[i] == 0 {
				why = fmt.Sprintf("holds a NUL byte at %d", i)
				break
			}
		}
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s name %s %s", ErrInvalidArgument, kind, shorten.Quoted(name), why)
}
