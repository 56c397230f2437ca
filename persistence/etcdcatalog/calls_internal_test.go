package etcdcatalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// A call whose context ended fails with the context's error, whatever
// etcd answered: a deadline that passed on the server came back as etcd's
// own "request timed out", which errors.Is did not tell from a failure of
// etcd's. A call whose context lives keeps etcd's error alone.
func TestEndedErrSaysTheContextEnded(t *testing.T) {
	ended, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ended.Done()

	err := endedErr(ended, rpctypes.ErrTimeout)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, rpctypes.ErrTimeout) {
		t.Errorf("endedErr(ended, ErrTimeout) = %v: want both DeadlineExceeded and ErrTimeout", err)
	}
	if err := endedErr(ended, context.DeadlineExceeded); err != context.DeadlineExceeded {
		t.Errorf("endedErr(ended, DeadlineExceeded) = %v: want it unchanged", err)
	}
	if err := endedErr(context.Background(), rpctypes.ErrTimeout); err != rpctypes.ErrTimeout {
		t.Errorf("endedErr(live, ErrTimeout) = %v: want it unchanged", err)
	}
	if err := endedErr(ended, nil); err != nil {
		t.Errorf("endedErr(ended, nil) = %v", err)
	}
	// etcd's answer may come before the context's timer fires.
	err = endedErr(passed{context.Background()}, rpctypes.ErrTimeout)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, rpctypes.ErrTimeout) {
		t.Errorf("endedErr(passed, ErrTimeout) = %v: want both DeadlineExceeded and ErrTimeout", err)
	}
}

// passed is a context whose deadline has passed and whose timer has not
// fired yet: Err is still nil.
type passed struct{ context.Context }

func (passed) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A call a member refuses, having no leader or being too far behind, is
// made again, on the next member, until one takes it; pausing after as
// many refusals in a row as there are members of three. Any other error
// is the call's answer at once.
func TestOnLeaderMakesARefusedCallAgain(t *testing.T) {
	for _, refusal := range []error{rpctypes.ErrNoLeader, rpctypes.ErrTooManyRequests} {
		calls := 0
		resp, err := onLeader(context.Background(), func(context.Context) (string, error) {
			calls++
			if calls <= 4 {
				return "", refusal
			}
			return "taken", nil
		})
		if err != nil || resp != "taken" || calls != 5 {
			t.Errorf("%v: onLeader = %q, %v after %d calls; want taken after 5", refusal, resp, err, calls)
		}
	}
	calls := 0
	_, err := onLeader(context.Background(), func(context.Context) (string, error) {
		calls++
		return "", rpctypes.ErrLeaseNotFound
	})
	if !errors.Is(err, rpctypes.ErrLeaseNotFound) || calls != 1 {
		t.Errorf("onLeader = %v after %d calls; want ErrLeaseNotFound after 1", err, calls)
	}
}
