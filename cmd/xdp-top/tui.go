package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/xdp-exporter/xdp_exporter/cmd/xdp-top/internal/top"
)

// model is the terminal UI: the endpoints' states, the view shown and
// the device filter being typed.
type model struct {
	states   []*endpointState
	interval time.Duration
	view     int
	filter   string
	editing  bool
	width    int
	height   int
	// body is the rendered view, redrawn when a scrape, a key or the
	// window changes it, not on every frame.
	body string
}

// scrapedMsg carries one round of scrapes, in endpoint order.
type scrapedMsg []fetched

type tickMsg struct{}

func newModel(eps []top.Endpoint, interval time.Duration, view, filter string) model {
	m := model{interval: interval, filter: filter, width: 80, height: 24}
	for i, v := range top.Views {
		if v == view {
			m.view = i
		}
	}
	for _, ep := range eps {
		m.states = append(m.states, &endpointState{ep: ep})
	}
	return m
}

// scrape fetches every endpoint off the UI goroutine; Update records the
// results, so the states are only touched there.
func (m model) scrape() tea.Cmd {
	eps := make([]top.Endpoint, len(m.states))
	for i, s := range m.states {
		eps[i] = s.ep
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), m.interval)
		defer cancel()
		return scrapedMsg(fetchAll(ctx, eps))
	}
}

func (m model) tick() tea.Cmd {
	return tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{} })
}

func (m model) Init() tea.Cmd { return tea.Batch(m.scrape(), m.tick()) }

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case tickMsg:
		return m, tea.Batch(m.scrape(), m.tick())
	case scrapedMsg:
		for i, f := range msg {
			m.states[i].record(f.scrape, f.err)
		}
	case tea.KeyMsg:
		if m.key(msg) {
			return m, tea.Quit
		}
	default:
		return m, nil
	}
	m.body = render(m.states, top.Views[m.view], m.filter, m.interval, m.height)
	return m, nil
}

// key applies a key press and reports whether it quits.
func (m *model) key(msg tea.KeyMsg) bool {
	if m.editing {
		switch msg.Type {
		case tea.KeyEnter, tea.KeyEsc:
			m.editing = false
		case tea.KeyBackspace:
			if m.filter != "" {
				m.filter = m.filter[:len(m.filter)-1]
			}
		case tea.KeyRunes:
			m.filter += string(msg.Runes)
		}
		return false
	}
	switch k := msg.String(); k {
	case "q", "ctrl+c":
		return true
	case "tab", "right":
		m.view = (m.view + 1) % len(top.Views)
	case "shift+tab", "left":
		m.view = (m.view + len(top.Views) - 1) % len(top.Views)
	case "/":
		m.editing, m.filter = true, ""
	default:
		if len(k) == 1 && k[0] >= '1' && int(k[0]-'1') < len(top.Views) {
			m.view = int(k[0] - '1')
		}
	}
	return false
}

var (
	headerStyle = lipgloss.NewStyle().Bold(true).Reverse(true)
	activeStyle = lipgloss.NewStyle().Bold(true).Underline(true)
)

func (m model) View() string {
	var tabs []string
	for i, v := range top.Views {
		tab := fmt.Sprintf("%d %s", i+1, v)
		if i == m.view {
			tab = activeStyle.Render(tab)
		}
		tabs = append(tabs, tab)
	}
	filter := m.filter
	if m.editing {
		filter += "_"
	}
	head := headerStyle.Render(clip(fmt.Sprintf(" xdp-top  every %v  device filter (/): %q  q quits ", m.interval, filter), m.width))
	return head + "\n" + strings.Join(tabs, "  ") + "\n" + fit(m.body, m.width, m.height-2)
}

// fit clips every line to width and the text to height lines, with a
// marker where it cut, instead of letting the terminal wrap.
func fit(s string, width, height int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if height < 1 {
		height = 1
	}
	if len(lines) > height {
		more := len(lines) - height + 1
		lines = append(lines[:height-1], fmt.Sprintf("... %d more lines (a larger terminal, or / to filter devices)", more))
	}
	for i, l := range lines {
		lines[i] = clip(l, width)
	}
	return strings.Join(lines, "\n")
}

// clip cuts a line to width columns, ending in ">" where it cut.
func clip(s string, width int) string {
	r := []rune(s)
	if width < 2 || len(r) <= width {
		return s
	}
	return string(r[:width-1]) + ">"
}
