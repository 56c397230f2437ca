package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"charm.land/lipgloss/v2/table"
	"golang.org/x/term"

	"github.com/lowwater/lowwater/wal"
)

// refresh is the live view's frame interval: four times a second.
const refresh = 250 * time.Millisecond

// The size the live view takes when its output is not a terminal: wide
// and tall enough for every column and the recent events.
const (
	offTerminalWidth  = 200
	offTerminalHeight = 50
)

// terminalWidth is the columns of w, a terminal; 0 if it is none, or
// narrower than the 40 columns the plain view's labels take.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil || cols < 40 {
		return 0
	}
	return cols
}

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
	if !isTerminal(out) {
		// Asked for by --view=live: with no terminal to give a size,
		// bubbletea would draw the frames into none.
		opts = append(opts, tea.WithWindowSize(offTerminalWidth, offTerminalHeight))
	}
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

// redraws reports whether a terminal of type term can take the live view,
// which moves the cursor: a dumb one (Emacs' shell, some CI logs) prints
// the escape sequences as they are.
func redraws(term string) bool { return term != "dumb" }

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
	height    int
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
	case tea.KeyPressMsg:
		if msg.String() == "ctrl+c" {
			m.interrupt()
		}
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
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

func (m *liveModel) View() tea.View {
	if m.last == nil {
		return tea.NewView("")
	}
	return tea.NewView(renderDashboard(*m.last, m.rates, m.width, m.height, m.final))
}

// renderDashboard is one frame of the live view, no wider than width and
// no taller than height when they are known (> 0); final is the frame left
// on the terminal at the end. A narrow terminal gets abbreviated headers,
// then fewer columns, named on a line of their own: a column is shown
// whole or not at all, never cut. A short one keeps the table's rows
// before the configuration and the names of the hidden columns, and shows
// the recent events only in what height is left.
func renderDashboard(v dashView, rates map[string]float64, width, height int, final bool) string {
	fit := func(s string) string { return s }
	if width > 0 {
		fit = func(s string) string { return truncate(s, width) }
	}
	elapsed := min(v.elapsed, v.duration)
	status := fmt.Sprintf("%.1fs / %v  %s", elapsed.Seconds(), v.duration, v.phase)
	// The bar gives up width before the time does, down to 4 cells, then
	// goes.
	bar := 24
	if width > 0 {
		bar = min(bar, width-len("lowwater demo")-len(status)-6)
	}
	title := fmt.Sprintf("%s  %s", styleTitle.Render("lowwater demo"), status)
	if bar >= 4 {
		title = fmt.Sprintf("%s  %s  %s", styleTitle.Render("lowwater demo"), progressBar(elapsed, v.duration, bar), status)
	}
	title = fit(title)
	var headers []string
	for _, h := range v.header {
		headers = append(headers, fit(styleDim.Render(h)))
	}
	catalog := fit(styleUp.Render("catalog up"))
	if v.outage != nil {
		catalog = fit(styleDown.Render(fmt.Sprintf("CATALOG DOWN: outage %d, %.1fs left; saves fail and are retried with backoff",
			v.outage.index, v.outageLeft.Seconds())))
	}
	// The footer, in short on a narrow terminal rather than cut.
	footer, short, style := "Ctrl-C stops gracefully (flushes the pending checkpoints); twice quits at once",
		"Ctrl-C stops gracefully; twice quits", styleDim
	switch {
	case final:
		footer, short = "the run is over; the summary follows", ""
	case v.interrupted:
		footer, short, style = "stopping gracefully (flushing pending checkpoints); Ctrl-C again quits at once",
			"stopping gracefully; Ctrl-C again quits", styleWarn
	}
	if width > 0 && len(footer) > width && short != "" {
		footer = short
	}
	footer = fit(style.Render(footer))

	all := v.names
	rows := len(all)
	var table []string
	var hiddenNote []string
	draw := func() {
		v.names = all[:rows]
		t, hidden := renderTable(v, rates, width)
		table, hiddenNote = strings.Split(t, "\n"), nil
		if n := maxWidth(t); width > 0 && n > width {
			// Narrower than the columns that never go: cut, a number
			// would read as another.
			say := fmt.Sprintf("the table needs %d columns: widen the terminal", n)
			if len(say) > width {
				say = fmt.Sprintf("widen to %d columns", n)
			}
			table = []string{fit(styleWarn.Render(say))}
			return
		}
		if len(hidden) > 0 {
			hiddenNote = wrapList("hidden to fit: ", hidden, " (widen the terminal)", width)
		}
	}
	draw()
	showHeaders, showHidden := true, true
	size := func() int {
		n := 1 + 1 + len(table) + 1 // title, catalog, table, footer
		if showHeaders {
			n += len(headers)
		}
		if showHidden {
			n += len(hiddenNote)
		}
		if rows < len(all) {
			n++ // the note of the rows shown
		}
		return n
	}
	if height > 0 {
		// What gives way to the table's rows, least needed first: on a
		// short terminal, the names of the hidden columns, then the
		// configuration; then the rows go, the first kept, and a note
		// says how many are shown.
		for _, keep := range []*bool{&showHidden, &showHeaders} {
			if size() > height {
				*keep = false
			}
		}
		for size() > height && rows > 1 {
			rows = max(1, rows-(size()-height))
			draw()
		}
	}
	// The recent events take what height is left, their title included.
	recent := recentLines
	if height > 0 {
		recent = min(recentLines, max(0, height-size()-1))
	}

	lines := []string{title}
	if showHeaders {
		lines = append(lines, headers...)
	}
	lines = append(lines, catalog)
	lines = append(lines, table...)
	if showHidden {
		for _, l := range hiddenNote {
			lines = append(lines, fit(styleDim.Render(l)))
		}
	}
	if rows < len(all) {
		note := fmt.Sprintf("%d of %d pchannels shown (a taller terminal shows them all)", rows, len(all))
		if width > 0 && len(note) > width {
			note = fmt.Sprintf("%d of %d pchannels shown", rows, len(all))
		}
		lines = append(lines, fit(styleDim.Render(note)))
	}
	if recent > 0 {
		lines = append(lines, styleTitle.Render("recent events"))
		shown := v.recent[max(0, len(v.recent)-recent):]
		for i := range recent {
			line := ""
			if i < len(shown) {
				line = shown[i]
			}
			lines = append(lines, fit("  "+line))
		}
	}
	lines = append(lines, footer)
	if height > 0 && len(lines) > height {
		// Too short even for one row: the bottom goes, not the title.
		// (bubbletea drops a frame's first lines when it is too tall.)
		lines = lines[:height]
	}
	// No newline after the last line: bubbletea would count a line more.
	return strings.Join(lines, "\n")
}

// column is one column of the live table: its header, a shorter header
// for narrow terminals, and its cell in each row.
type column struct {
	header, short string
	cell          func(name string, r dashRow, short bool) string
	numeric       bool
	// drop orders the columns a narrow terminal loses: 1 goes first, 0
	// never goes.
	drop int
}

func liveColumns(rates map[string]float64) []column {
	return []column{
		{header: "PCHANNEL", short: "PCHANNEL", cell: func(n string, _ dashRow, _ bool) string { return n }},
		{header: "STATE", short: "STATE", cell: stateCell, drop: 8},
		{header: "VCHANNELS", short: "VCH", cell: func(_ string, r dashRow, _ bool) string { return fmt.Sprint(r.vchannels) }, numeric: true, drop: 2},
		{header: "MINIMUM", short: "MINIMUM", cell: func(_ string, r dashRow, short bool) string { return idCell(r.minimum, short) }, numeric: true},
		{header: "HOLDER", short: "HOLDER", cell: holderCell, drop: 3},
		{header: "PERSISTED", short: "PERSISTED", cell: func(_ string, r dashRow, short bool) string { return idCell(r.persisted, short) }, numeric: true},
		{header: "LAG", short: "LAG", cell: func(_ string, r dashRow, _ bool) string { return lag(r) }, numeric: true, drop: 4},
		{header: "BEHIND FOR", short: "BEHIND", cell: func(_ string, r dashRow, _ bool) string {
			if r.behindSince.IsZero() {
				return "-"
			}
			return fmt.Sprintf("%.2fs", time.Since(r.behindSince).Seconds())
		}, numeric: true, drop: 1},
		{header: "SAVES", short: "SAVES", cell: func(_ string, r dashRow, _ bool) string { return fmt.Sprint(r.saves) }, numeric: true, drop: 6},
		{header: "FAILURES", short: "FAILS", cell: func(_ string, r dashRow, _ bool) string { return fmt.Sprint(r.failures) }, numeric: true, drop: 7},
		{header: "UPDATES/S", short: "UPD/S", cell: func(n string, _ dashRow, _ bool) string { return fmt.Sprintf("%.0f", rates[n]) }, numeric: true, drop: 5},
	}
}

// stateCell is the pchannel's state. A narrow table, which hides the
// holder column first, says "at end" there for a healthy pchannel whose
// minimum stands at the last offset: it is the one column that stays. So
// that it does, the counters go before it.
func stateCell(_ string, r dashRow, short bool) string {
	switch {
	case !short:
		return stateMarks[r.state] + " " + r.state
	case r.atEnd && r.state == stateHealthy:
		return stateMarks[r.state] + " at end"
	}
	return stateMarks[r.state] + " " + shortStates[r.state]
}

// holderCell names the vchannel holding the minimum back, and how long
// the minimum has not risen when it is stalled (--stall-after). At the
// last offset nothing holds it back.
func holderCell(_ string, r dashRow, short bool) string {
	if r.atEnd {
		return "at end"
	}
	h := r.holder
	if h == "" {
		h = "-"
	}
	if r.stalledSince.IsZero() {
		return h
	}
	held := time.Since(r.stalledSince).Seconds()
	if short {
		return fmt.Sprintf("%s !%.0fs", h, held)
	}
	return fmt.Sprintf("%s STALLED %.1fs", h, held)
}

// shortStates name the states in a narrow table.
var shortStates = map[string]string{stateHealthy: "ok", stateRetrying: "retry", stateRecovering: "recov", stateStopped: "stop"}

// idCell formats an ID for the table; a narrow table leaves out the WAL's
// name, which the header lines give once.
func idCell(id wal.MessageID, short bool) string {
	s := wal.String(id)
	if _, rest, ok := strings.Cut(s, ":"); ok && short && id != nil {
		return rest
	}
	return s
}

// renderTable draws the pchannel table within width (when > 0): with the
// full headers if they fit, else the short ones, dropping columns in their
// drop order until it fits, then taking back any dropped before the last
// that fits again (a narrow column dropped early, once a wide one has
// gone). It returns the headers of the columns dropped, in drop order.
func renderTable(v dashView, rates map[string]float64, width int) (string, []string) {
	all := liveColumns(rates)
	out := drawTable(v, all, false)
	if width <= 0 || maxWidth(out) <= width {
		return out, nil
	}
	shown := make([]bool, len(all))
	for i := range shown {
		shown[i] = true
	}
	draw := func() (string, bool) {
		var cols []column
		for i, c := range all {
			if shown[i] {
				cols = append(cols, c)
			}
		}
		out := drawTable(v, cols, true)
		return out, maxWidth(out) <= width
	}
	var dropped []int
	out, fits := draw()
	for !fits {
		i := nextToDrop(all, shown)
		if i < 0 {
			break // only the columns that never go are left
		}
		shown[i] = false
		dropped = append(dropped, i)
		out, fits = draw()
	}
	for j := len(dropped) - 2; j >= 0 && fits; j-- {
		i := dropped[j]
		shown[i] = true
		if o, ok := draw(); ok {
			out = o
			dropped = append(dropped[:j], dropped[j+1:]...)
		} else {
			shown[i] = false
		}
	}
	// Named as the narrowed table names its columns.
	hidden := make([]string, len(dropped))
	for k, i := range dropped {
		hidden[k] = cmp.Or(all[i].short, all[i].header)
	}
	return out, hidden
}

// nextToDrop is the shown column that goes first, or -1 if none may.
func nextToDrop(cols []column, shown []bool) int {
	at := -1
	for i, c := range cols {
		if shown[i] && c.drop > 0 && (at < 0 || c.drop < cols[at].drop) {
			at = i
		}
	}
	return at
}

func drawTable(v dashView, cols []column, short bool) string {
	headers := make([]string, len(cols))
	for i, c := range cols {
		headers[i] = c.header
		if short {
			headers[i] = c.short
		}
	}
	t := table.New().Border(lipgloss.RoundedBorder()).BorderStyle(styleDim).Headers(headers...)
	for _, n := range v.names {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = c.cell(n, v.rows[n], short)
		}
		t.Row(cells...)
	}
	t.StyleFunc(func(row, col int) lipgloss.Style {
		switch {
		case row == table.HeaderRow:
			return styleHeader
		case cols[col].header == "STATE" && row >= 0 && row < len(v.names):
			return stateStyles[v.rows[v.names[row]].state].Padding(0, 1)
		case cols[col].header == "HOLDER" && row >= 0 && row < len(v.names) && !v.rows[v.names[row]].stalledSince.IsZero():
			return styleWarn.Padding(0, 1)
		case cols[col].numeric:
			return styleNumeric
		}
		return styleCell
	})
	return t.Render()
}

func maxWidth(s string) int {
	w := 0
	for _, line := range strings.Split(s, "\n") {
		w = max(w, lipgloss.Width(line))
	}
	return w
}

// wrapList writes prefix, the items joined by ", " and suffix on as many
// lines as it takes to keep each within width (when > 0), breaking only
// after a comma or before the suffix, so that no item is cut.
func wrapList(prefix string, items []string, suffix string, width int) []string {
	var lines []string
	line := prefix
	for i, it := range items {
		piece := it
		if i < len(items)-1 {
			piece += ","
		}
		switch {
		case line == prefix:
			line += piece
		case width > 0 && lipgloss.Width(line)+1+lipgloss.Width(piece) > width:
			lines = append(lines, line)
			line = "  " + piece
		default:
			line += " " + piece
		}
	}
	if width > 0 && lipgloss.Width(line)+lipgloss.Width(suffix) > width {
		return append(lines, line, strings.TrimSpace(suffix))
	}
	return append(lines, line+suffix)
}

// truncate shortens a line of prose to width, marking the cut with "…".
func truncate(s string, width int) string {
	if lipgloss.Width(s) <= width {
		return s
	}
	return lipgloss.NewStyle().MaxWidth(width-1).Render(s) + "…"
}

func progressBar(done, total time.Duration, width int) string {
	n := 0
	if total > 0 {
		n = int(float64(width) * float64(done) / float64(total))
	}
	n = min(max(n, 0), width)
	return "[" + strings.Repeat("█", n) + strings.Repeat("░", width-n) + "]"
}
