package catalogurl_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/internal/catalogurl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	for spec, want := range map[string]catalogurl.URL{
		"bolt":                           {Kind: "bolt"},
		"bolt:/tmp/x.db":                 {Kind: "bolt", Path: "/tmp/x.db"},
		"bolt:rel/x:y.db":                {Kind: "bolt", Path: "rel/x:y.db"},
		"memory":                         {Kind: "memory"},
		"etcd://h1:2379,h2:2379/lowater": {Kind: "etcd", Endpoints: []string{"h1:2379", "h2:2379"}, Prefix: "lowater"},
		"etcd://h1:2379":                 {Kind: "etcd", Endpoints: []string{"h1:2379"}, Prefix: "lowwater"},
		"etcd://127.0.0.1:1/a/b":         {Kind: "etcd", Endpoints: []string{"127.0.0.1:1"}, Prefix: "a/b"},
	} {
		got, err := catalogurl.Parse(spec)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = (%+v, %v), want %+v", spec, got, err, want)
		}
	}
	for _, bad := range []string{"", "nats:x", "memory:x", "etcd", "etcd:h1:2379", "etcd:///p", "etcd://h1,,h2/p", "etcd://nohostport/p", "etcd://h:0/p", "etcd://h:x/p", "etcd://:2379/p", "etcd://h:1/p/", "etcd://h:1//", "etcd://h:1/lowwater/wal/b", "etcd://h:1/a/wal"} {
		if got, err := catalogurl.Parse(bad); !errors.Is(err, catalogurl.ErrInvalid) {
			t.Errorf("Parse(%q) = (%+v, %v), want ErrInvalid", bad, got, err)
		}
	}
	// A user and password in the URL are refused, as ErrCredentials; no
	// error quotes the password, whatever it holds and whatever else is
	// wrong with the URL.
	for _, spec := range []string{"etcd://alice:s3cret@127.0.0.1:2379/lowwater", "etcd://alice:s3cret@h1:1,h2:2",
		"etcd://alice:s3/cr@et@h:1/p", "etcd://alice:s3/cret@h:1"} {
		if _, err := catalogurl.Parse(spec); !errors.Is(err, catalogurl.ErrCredentials) || strings.Contains(err.Error(), "cr") {
			t.Errorf("Parse(%q) = %v, want ErrCredentials, without the password", spec, err)
		}
	}
	for _, spec := range []string{"ETCD://alice:s3cret@h:1/p", "etcd:///alice:s3cret@h:1", "etcd://alice:s3/cret@nohost/p", "memory://alice:s3cret@h"} {
		if _, err := catalogurl.Parse(spec); !errors.Is(err, catalogurl.ErrInvalid) || strings.Contains(err.Error(), "s3") {
			t.Errorf("Parse(%q) = %v, want ErrInvalid, without the password", spec, err)
		}
	}
	_, err := catalogurl.Parse("etcd://alice:s3cret@127.0.0.1:2379/lowwater")
	want := `invalid catalog URL: a user and password do not go in the URL, where every user of the machine sees them: ` +
		`"etcd://…@127.0.0.1:2379/lowwater"`
	if err == nil || err.Error() != want {
		t.Errorf("Parse with a password = %v, want %s", err, want)
	}
	// An '@' in the prefix is the prefix's.
	if got, err := catalogurl.Parse("etcd://h:1/a@b"); err != nil || got.Prefix != "a@b" {
		t.Errorf("Parse(etcd://h:1/a@b) = (%+v, %v), want the prefix a@b", got, err)
	}
	// A bare path is a bbolt file without its kind: the error says how.
	for _, path := range []string{"/tmp/p.db", "checkpoints.db", "data/x"} {
		_, err := catalogurl.Parse(path)
		if !errors.Is(err, catalogurl.ErrInvalid) || !strings.Contains(err.Error(), "give bolt:"+path) {
			t.Errorf("Parse(%q) = %v, want a hint at bolt:%s", path, err, path)
		}
	}
}
