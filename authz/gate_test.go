package authz

import (
	"context"
	"errors"
	"testing"
)

// askAll asks about every call.
type askAll struct{}

func (askAll) Decide(context.Context, string, map[string]any, Context) Decision {
	return Ask("sure?", "ask-all")
}

// The gate refuses past the rate before it looks at anything else,
// refuses a sensitive tool nobody guards, and otherwise answers what the
// authorizer decided.
func TestGateChecksRateThenSensitivityThenThePolicy(t *testing.T) {
	c := Context{Principal: Principal{Subject: "alice"}}
	ctx := context.Background()
	limit := NewRateLimiter(Limits{CallsPerSecond: 0.001, CallBurst: 1})
	guarded := &Guard{Tools: askAll{}}

	if d, err := Gate(ctx, guarded, limit, "s.w.click", nil, c, true); err != nil || d.Kind != KindAsk {
		t.Fatalf("first call: %v %v; want the authorizer's Ask", d, err)
	}
	if d, err := Gate(ctx, guarded, limit, "s.w.click", nil, c, false); !errors.Is(err, ErrRateLimited) || d.Kind != KindDeny {
		t.Fatalf("second call past the burst: %v %v; want ErrRateLimited", d, err)
	}
	if d, err := Gate(ctx, &Guard{}, nil, "swarm_stop", nil, c, true); !errors.Is(err, ErrSensitiveUnguarded) || d.Kind != KindDeny {
		t.Fatalf("a sensitive tool with no authorizer: %v %v; want ErrSensitiveUnguarded", d, err)
	}
	if d, err := Gate(ctx, &Guard{}, nil, "swarm_list", nil, c, false); err != nil || d.Kind != KindAllow {
		t.Fatalf("a plain tool with no authorizer: %v %v; want Allow", d, err)
	}
}
