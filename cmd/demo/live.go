package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"
	"golang.org/x/term"

	"github.com/lowwater/lowwater/wal"
)

// refresh is the live view's frame interval: four times a second.
const refresh = 250 * time.Millisecond

// isTerminal reports whether w is a terminal: the live view needs one.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Styles of the live view.
var (
	styleTitle   = lipgloss.NewStyle().Bold(true)
	styleDim     = lipgloss.NewStyle().Faint(true)
	styleDown    = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("1"))
	styleUp      = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	styleWarn    = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("3"))
	styleHeader  = lipgloss.NewStyle().Bold(true).Padding(0, 1)
	styleCell    = lipgloss.NewStyle().Padding(0, 1)
	styleNumeric = styleCell.Align(lipgloss.Right)
	stateStyles  = map[string]lipgloss.Style{
		stateHealthy:    lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		stateRetrying:   lipgloss.NewStyle().Foreground(lipgloss.Color("3")).Bold(true),
		stateRecovering: lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		stateStopped:    lipgloss.NewStyle().Faint(true),
	}
	stateMarks = map[string]string{stateHealthy: "●", stateRetrying: "◐", stateRecovering: "○", stateStopped: "■"}
)

// liveView runs the bubbletea program that draws the dashboard. Ctrl-C
// goes to interrupt, as a signal would in the plain mode.
type liveView struct {
	program *tea.Program
	done    chan struct{}
	err     error
}

type tickMsg time.Time

// quitMsg asks the view to draw its last frame and end.
type quitMsg struct{}

func startLiveView(dash *dashboard, out io.Writer, in io.Reader, interrupt func()) *liveView {
	opts := []tea.ProgramOption{tea.WithOutput(out), tea.WithoutSignalHandler()}
	if isTerminalReader(in) {
		opts = append(opts, tea.WithInput(in))
	} else {
		opts = append(opts, tea.WithInput(nil))
	}
	v := &liveView{done: make(chan struct{})}
	v.program = tea.NewProgram(&liveModel{dash: dash, interrupt: interrupt, prev: map[string]uint64{}, rates: map[string]float64{}}, opts...)
	go func() {
		defer close(v.done)
		_, v.err = v.program.Run()
	}()
	return v
}

func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// stop draws the last frame, ends the program and restores the terminal.
func (v *liveView) stop() error {
	v.program.Send(quitMsg{})
	<-v.done
	return v.err
}

// kill ends the program at once, restoring the terminal.
func (v *liveView) kill() {
	v.program.Kill()
	<-v.done
}

// liveModel is the bubbletea model: the dashboard plus the update rates it
// computes between frames.
type liveModel struct {
	dash      *dashboard
	interrupt func()
	width     int
	prev      map[string]uint64
	prevAt    time.Time
	rates     map[string]float64
	last      *dashView
	final     bool
}

func tick() tea.Cmd { return tea.Tick(refresh, func(t time.Time) tea.Msg { return tickMsg(t) }) }

func (m *liveModel) Init() tea.Cmd {
	m.sample()
	return tick()
}

func (m *liveModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tickMsg:
		m.sample()
		return m, tick()
	case tea.KeyMsg:
		if msg.Type == tea.KeyCtrlC {
			m.interrupt()
		}
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case quitMsg:
		m.sample()
		m.final = true
		return m, tea.Quit
	}
	return m, nil
}

// sample takes a frame's copy of the dashboard and the update rates.
func (m *liveModel) sample() {
	v := m.dash.view()
	now := time.Now()
	if dt := now.Sub(m.prevAt).Seconds(); !m.prevAt.IsZero() && dt > 0 {
		for n, u := range v.updates {
			if u >= m.prev[n] {
				m.rates[n] = float64(u-m.prev[n]) / dt
			}
		}
	}
	for n, u := range v.updates {
		m.prev[n] = u
	}
	m.prevAt = now
	m.last = &v
}

func (m *liveModel) View() string {
	if m.last == nil {
		return ""
	}
	return renderDashboard(*m.last, m.rates, m.width, m.final)
}

// renderDashboard is one frame of the live view, no wider than width when
// it is known (> 0); final is the frame left on the terminal at the end.
func renderDashboard(v dashView, rates map[string]float64, width int, final bool) string {
	fit := func(s string) string { return s }
	if width > 0 {
		clip := lipgloss.NewStyle().MaxWidth(width)
		fit = func(s string) string { return clip.Render(s) }
	}
	var b strings.Builder
	elapsed := min(v.elapsed, v.duration)
	fmt.Fprintf(&b, "%s  %s  %s\n", styleTitle.Render("lowwater demo"),
		progressBar(elapsed, v.duration, 24), fmt.Sprintf("%.1fs / %v  %s", elapsed.Seconds(), v.duration, v.phase))
	for _, h := range v.header {
		fmt.Fprintln(&b, fit(styleDim.Render(h)))
	}
	if v.outage != nil {
		fmt.Fprintln(&b, styleDown.Render(fmt.Sprintf("CATALOG DOWN: outage %d, %.1fs left; saves fail and are retried with backoff", v.outage.index, v.outageLeft.Seconds())))
	} else {
		fmt.Fprintln(&b, styleUp.Render("catalog up"))
	}

	t := table.New().
		Border(lipgloss.RoundedBorder()).
		BorderStyle(styleDim).
		Headers("PCHANNEL", "STATE", "VCHANNELS", "MINIMUM", "PERSISTED", "LAG", "BEHIND FOR", "SAVES", "FAILURES", "UPDATES/S")
	for _, n := range v.names {
		r := v.rows[n]
		behind := "-"
		if !r.behindSince.IsZero() {
			behind = fmt.Sprintf("%.2fs", time.Since(r.behindSince).Seconds())
		}
		t.Row(n, stateMarks[r.state]+" "+r.state, fmt.Sprint(r.vchannels), wal.String(r.minimum), wal.String(r.persisted),
			lag(r), behind, fmt.Sprint(r.saves), fmt.Sprint(r.failures), fmt.Sprintf("%.0f", rates[n]))
	}
	t.StyleFunc(func(row, col int) lipgloss.Style {
		if row == table.HeaderRow {
			return styleHeader
		}
		if col == 1 && row >= 0 && row < len(v.names) {
			return stateStyles[v.rows[v.names[row]].state].Padding(0, 1)
		}
		if col >= 2 {
			return styleNumeric
		}
		return styleCell
	})
	fmt.Fprintln(&b, t.Render())

	fmt.Fprintln(&b, styleTitle.Render("recent events"))
	for i := range recentLines {
		line := ""
		if i < len(v.recent) {
			line = v.recent[i]
		}
		fmt.Fprintln(&b, fit("  "+line))
	}
	switch {
	case final:
		fmt.Fprintln(&b, styleDim.Render("the run is over; the summary follows"))
	case v.interrupted:
		fmt.Fprintln(&b, styleWarn.Render("stopping gracefully: flushing the pending checkpoints; Ctrl-C again quits at once"))
	default:
		fmt.Fprintln(&b, styleDim.Render("Ctrl-C stops gracefully (flushes the pending checkpoints); twice quits at once"))
	}
	return b.String()
}

func progressBar(done, total time.Duration, width int) string {
	n := 0
	if total > 0 {
		n = int(float64(width) * float64(done) / float64(total))
	}
	n = min(max(n, 0), width)
	return "[" + strings.Repeat("█", n) + strings.Repeat("░", width-n) + "]"
}
