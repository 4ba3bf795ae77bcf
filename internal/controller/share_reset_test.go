package controller

import (
	"testing"
	"time"
)

// TestShareAutoOffsetReset checks share.auto.offset.reset's values: latest, earliest, and
// by_duration: with the durations java.time.Duration.parse takes (without signs), refusing the rest.
func TestShareAutoOffsetReset(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"by_duration:PT0S":           0,
		"by_duration:P1D":            24 * time.Hour,
		"by_duration:PT1H":           time.Hour,
		"by_duration:pt90m":          90 * time.Minute,
		"by_duration:P2DT3H4M5.5S":   51*time.Hour + 4*time.Minute + 5500*time.Millisecond,
		"by_duration:PT0.000000001S": time.Nanosecond,
		"by_duration:PT1,25S":        1250 * time.Millisecond,
		"by_duration:P106751D":       106751 * 24 * time.Hour,
	} {
		if got, err := shareAutoOffsetReset(" " + v + " "); err != nil || got != v {
			t.Errorf("%s: %q, %v", v, got, err)
		}
		if d, ok := ShareResetDuration(v); !ok || d != want {
			t.Errorf("%s: duration %v %v, want %v", v, d, ok, want)
		}
	}
	for _, v := range []string{"latest", "earliest"} {
		if got, err := shareAutoOffsetReset(v); err != nil || got != v {
			t.Errorf("%s: %q, %v", v, got, err)
		}
		if _, ok := ShareResetDuration(v); ok {
			t.Errorf("%s has a duration", v)
		}
	}
	for _, v := range []string{"", "none", "by_duration:", "by_duration:P", "by_duration:PT", "by_duration:1H", "by_duration:PT-1H",
		"by_duration:-PT1H", "by_duration:P1H", "by_duration:PT1D", "by_duration:PT1M1H", "by_duration:PT1H1H", "by_duration:P1.5D",
		"by_duration:PT1.S", "by_duration:PT1.1234567890S", "by_duration:PTT1H", "by_duration:PT1", "by_duration:P1DT",
		"by_duration:P106752D", "by_duration:PT9223372036854775807S", "by_duration:P1W", "by_duration:P1Y", "BY_DURATION:PT1H"} {
		if got, err := shareAutoOffsetReset(v); err == nil {
			t.Errorf("%q accepted as %q", v, got)
		}
	}
}
