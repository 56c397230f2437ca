package persistence

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateNames(t *testing.T) {
	for _, ok := range []string{"p", "by-dev-rootcoord-dml_0", strings.Repeat("x", MaxNameLen), "日本語"} {
		require.NoError(t, ValidatePChannel(ok), "%q", ok)
		require.NoError(t, ValidateVChannel(ok), "%q", ok)
	}
	for name, bad := range map[string]string{
		"empty":    "",
		"too long": strings.Repeat("x", MaxNameLen+1),
		"40 KB":    strings.Repeat("x", 40<<10),
		"not UTF8": "a\xffb",
		"NUL":      "a\x00b",
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, ValidatePChannel(bad), ErrInvalidArgument)
			require.ErrorIs(t, ValidateVChannel(bad), ErrInvalidArgument)
			require.Less(t, len(ValidatePChannel(bad).Error()), 200, "the message does not repeat a huge name")
		})
	}
}
