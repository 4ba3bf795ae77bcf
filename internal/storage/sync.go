package storage

// Sync makes everything appended so far durable on the calling goroutine, whatever the flush policy, and
// returns the error that took the log offline, if one did. It first waits for a roll's background job in
// flight, which holds the durable point back until the sealed segment is synced. A caller that drives
// logs step by step (a deterministic simulation) uses it instead of the Syncer's rounds.
func (l *Log) Sync() error {
	l.settle()
	l.syncNow()
	return l.Err()
}
