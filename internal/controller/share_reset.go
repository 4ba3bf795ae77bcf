package controller

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// shareResetByDuration prefixes a share.auto.offset.reset that starts a share-partition without state
// at its first record at most a duration old: by_duration:PnDTnHnMn.nS (Kafka's, KIP-1106).
const shareResetByDuration = "by_duration:"

// ShareResetDuration returns the duration of a share.auto.offset.reset of the form
// by_duration:PnDTnHnMn.nS; false for latest, earliest or anything not valid.
func ShareResetDuration(v string) (time.Duration, bool) {
	s, ok := strings.CutPrefix(v, shareResetByDuration)
	if !ok {
		return 0, false
	}
	d, err := parseISODuration(s)
	return d, err == nil
}

// shareAutoOffsetReset checks a share.auto.offset.reset: latest, earliest, or by_duration: with a
// non-negative ISO-8601 duration.
func shareAutoOffsetReset(v string) (string, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "latest", "earliest":
		return v, nil
	}
	s, ok := strings.CutPrefix(v, shareResetByDuration)
	if !ok {
		return "", fmt.Errorf("%q is not one of latest, earliest, %sPnDTnHnMn.nS", v, shareResetByDuration)
	}
	if _, err := parseISODuration(s); err != nil {
		return "", fmt.Errorf("%q: %w", v, err)
	}
	return v, nil
}

var errISODuration = errors.New("not an ISO-8601 duration PnDTnHnMn.nS of zero or more")

// parseISODuration parses the days-and-time durations java.time.Duration.parse takes, without
// signs: P, then days (nD), then T and hours (nH), minutes (nM) and seconds (n.nS, up to nine
// decimals), each optional and in that order, at least one given; the letters in either case.
func parseISODuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" {
		return 0, errISODuration
	}
	units := []struct {
		letter byte
		size   time.Duration
		time   bool // after T
	}{{'D', 24 * time.Hour, false}, {'H', time.Hour, true}, {'M', time.Minute, true}, {'S', time.Second, true}}
	var total time.Duration
	next, inTime := 0, false
	for rest != "" {
		if rest[0] == 'T' {
			if inTime || len(rest) == 1 {
				return 0, errISODuration
			}
			inTime, rest = true, rest[1:]
			continue
		}
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		whole, frac := rest[:i], ""
		if i < len(rest) && (rest[i] == '.' || rest[i] == ',') {
			j := i + 1
			for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
				j++
			}
			frac, i = rest[i+1:j], j
			if frac == "" || len(frac) > 9 {
				return 0, errISODuration
			}
		}
		if whole == "" || i == len(rest) {
			return 0, errISODuration
		}
		u := next
		for u < len(units) && units[u].letter != rest[i] {
			u++
		}
		if u == len(units) || units[u].time != inTime || (frac != "" && units[u].letter != 'S') {
			return 0, errISODuration
		}
		n, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || n > (math.MaxInt64-int64(total))/int64(units[u].size) {
			return 0, fmt.Errorf("%w: %s is too long", errISODuration, s)
		}
		total += time.Duration(n) * units[u].size
		if frac != "" {
			ns, _ := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
			if time.Duration(ns) > math.MaxInt64-total {
				return 0, fmt.Errorf("%w: %s is too long", errISODuration, s)
			}
			total += time.Duration(ns)
		}
		next, rest = u+1, rest[i+1:]
	}
	if next == 0 {
		return 0, errISODuration
	}
	return total, nil
}
