package poll

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestWaitReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	err := Wait(time.Minute, func() error {
		n++
		if n < 3 {
			return fmt.Errorf("call %d", n)
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("Wait = %v after %d calls, want nil after 3", err, n)
	}
}

func TestWaitReturnsTheLastErrorAtTheDeadline(t *testing.T) {
	n := 0
	err := Wait(20*time.Millisecond, func() error {
		n++
		return fmt.Errorf("call %d", n)
	})
	if err == nil || err.Error() != fmt.Sprintf("call %d", n) || n < 2 {
		t.Fatalf("Wait = %v after %d calls, want the last call's error", err, n)
	}
}

func TestWaitChecksBeforeWaiting(t *testing.T) {
	errNever := errors.New("never")
	n := 0
	if err := Wait(0, func() error { n++; return errNever }); !errors.Is(err, errNever) || n != 1 {
		t.Fatalf("Wait(0) = %v after %d calls, want one call and its error", err, n)
	}
}
