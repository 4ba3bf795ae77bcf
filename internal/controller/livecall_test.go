package controller

import (
	"errors"
	"testing"
	"time"
)

// TestRaftConfigLiveCallTimeout checks the bound of a registration or heartbeat call: half of what
// the session leaves after a heartbeat interval, capped by the RPC timeout, and a heartbeat interval
// that is not shorter than the session refused, since no call could then be bounded.
func TestRaftConfigLiveCallTimeout(t *testing.T) {
	for _, c := range []struct {
		interval, session, rpc, want time.Duration
	}{
		{500 * time.Millisecond, 6 * time.Second, 5 * time.Second, 2750 * time.Millisecond},
		{200 * time.Millisecond, 2 * time.Second, 5 * time.Second, 900 * time.Millisecond},
		{time.Second, 30 * time.Second, 5 * time.Second, 5 * time.Second},
	} {
		cfg := RaftConfig{HeartbeatInterval: c.interval, SessionTimeout: c.session, RPCTimeout: c.rpc}
		if got := cfg.liveCallTimeout(); got != c.want {
			t.Errorf("interval %s, session %s, rpc %s: %s, want %s", c.interval, c.session, c.rpc, got, c.want)
		}
	}
	_, err := OpenRaft(RaftConfig{Clock: realClock{}, HeartbeatInterval: 2 * time.Second, SessionTimeout: 2 * time.Second})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a heartbeat interval equal to the session: %v, want ErrInvalidConfig", err)
	}
}
