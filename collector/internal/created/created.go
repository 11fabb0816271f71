// Package created remembers when each series of run-time-created counters
// was first sent: its created timestamp, which the OpenMetrics exposition
// serves as _created and the protobuf one as created_timestamp, so that
// Prometheus (created-timestamp zero ingestion) counts the increase of a
// series' first interval instead of taking its first value as the
// baseline.
package created

import (
	"sync"
	"time"
)

// ForgetAfter is how long a series may go unsent before a Tracker forgets
// it; one that comes back after that is created anew.
const ForgetAfter = 10 * time.Minute

// Tracker holds the created time of each series by key. A series not sent
// for ForgetAfter is forgotten at Sweep, which bounds the memory; a scrape
// that missed a series (a collector that failed part-way) keeps its
// created time. The zero value is ready to use.
type Tracker struct {
	mu sync.Mutex
	at map[string]series
}

type series struct{ created, sent time.Time }

// Time returns the created time of the series key, now if it is new, and
// records that it was sent now.
func (s *Tracker) Time(key string) time.Time {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[string]series{}
	}
	e, ok := s.at[key]
	if !ok {
		e.created = now
	}
	e.sent = now
	s.at[key] = e
	return e.created
}

// Sweep forgets the series not sent for ForgetAfter; a collector calls it
// at the end of each Update.
func (s *Tracker) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, e := range s.at {
		if time.Since(e.sent) > ForgetAfter {
			delete(s.at, key)
		}
	}
}
