package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/xdp-exporter/xdp_exporter/cmd/xdp-top/internal/top"
)

// endpointState is the last two good scrapes of an endpoint and the
// outcome of the latest attempt.
type endpointState struct {
	ep        top.Endpoint
	prev, cur *top.Scrape
	err       error
}

// record keeps a scrape, or the error of a failed one; after a failure the
// next good scrape's rates are over the whole gap, and a restarted
// exporter's counters count from zero (top.Rates).
func (s *endpointState) record(sc *top.Scrape, err error) {
	if err != nil {
		s.err = err
		return
	}
	s.err = nil
	s.prev, s.cur = s.cur, sc
}

// status is the endpoint's one-line header.
func (s *endpointState) status(interval time.Duration) string {
	if s.err != nil {
		return fmt.Sprintf("== %s %s: unreachable: %v (retrying every %v)", s.ep.Name, s.ep.URL, oneLine(s.err), interval)
	}
	if s.cur == nil {
		return fmt.Sprintf("== %s %s: connecting", s.ep.Name, s.ep.URL)
	}
	return fmt.Sprintf("== %s %s: scraped %s", s.ep.Name, s.ep.URL, s.cur.At.Format("15:04:05"))
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// fetched is one endpoint's scrape or error.
type fetched struct {
	scrape *top.Scrape
	err    error
}

// fetchAll scrapes every endpoint at once.
func fetchAll(ctx context.Context, eps []top.Endpoint) []fetched {
	out := make([]fetched, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].scrape, out[i].err = ep.Fetch(ctx)
		}()
	}
	wg.Wait()
	return out
}

// render draws one view for every endpoint, each of at most rows lines
// (0: all).
func render(states []*endpointState, view, filter string, interval time.Duration, rows int) string {
	var b strings.Builder
	for _, s := range states {
		b.WriteString(s.status(interval) + "\n")
		if s.cur != nil {
			b.WriteString(top.RenderRows(view, s.prev, s.cur, filter, rows))
		}
	}
	return b.String()
}

// textRun is xdp-top without its terminal UI.
type textRun struct {
	interval     time.Duration
	view, filter string
	views        bool   // print the view every interval (--plain)
	summary      string // "", "md" or "csv": the means over the run, at its end
}

// run scrapes until ctx ends: with views, printing the view (or every
// view) once per interval from the second scrape on, the first with
// rates; with a summary, printing it at the end.
func (r textRun) run(ctx context.Context, w io.Writer, eps []top.Endpoint) {
	states := make([]*endpointState, len(eps))
	sums := make([]*top.Summary, len(eps))
	for i, ep := range eps {
		states[i] = &endpointState{ep: ep}
		sums[i] = top.NewSummary()
	}
	defer func() {
		for i, s := range sums {
			switch r.summary {
			case "md":
				fmt.Fprintln(w, s.Markdown(eps[i].Name))
			case "csv":
				fmt.Fprint(w, s.CSV(eps[i].Name))
			}
		}
	}()
	views := []string{r.view}
	if r.view == "all" {
		views = top.Views
	}
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for round := 0; ; round++ {
		results := fetchAll(ctx, eps)
		if ctx.Err() != nil {
			return // the run ended during this scrape
		}
		for i, f := range results {
			states[i].record(f.scrape, f.err)
			if f.err == nil {
				sums[i].Add(states[i].prev, states[i].cur)
			}
		}
		if r.views && round > 0 {
			for _, v := range views {
				fmt.Fprintf(w, "--- %s %s\n%s\n", time.Now().Format(time.RFC3339), v, render(states, v, r.filter, r.interval, 0))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
