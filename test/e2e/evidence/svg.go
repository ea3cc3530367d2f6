package evidence

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
)

// TimelineSVG draws the deletions of scenarios 1 and 2 on one time axis
// (seconds after the delete call): what pkg/budget predicts for the lab
// Pod, what was measured for it, and the control arm. It returns "" when
// the lab did not run. Hand-written SVG, no plotting library.
func TimelineSVG(r *Run) string {
	if r.Lab == nil {
		return ""
	}
	lanes := timelineLanes(r)
	c := newTimeline(lanes)
	var b strings.Builder
	c.header(&b, r)
	c.axis(&b)
	for i, l := range lanes {
		c.lane(&b, i, l)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// A lane is one row of the timeline: bars (phases, a request) and markers
// (moments) against the SIGKILL deadline.
type lane struct {
	title, sub string
	bars       []bar
	marks      []marker
	deadline   float64 // SIGKILL deadline, < 0 for none
}

// A bar spans from..to; opacity below 1 marks a request (labelled below).
type bar struct {
	from, to float64
	label    string
	color    string
	opacity  float64
}

type marker struct {
	at    float64
	label string
	color string
}

// timelineLanes are the lab's predicted and measured deletions, and the
// control arm's when it ran.
func timelineLanes(r *Run) []lane {
	lab, ctl := r.Lab, r.Control
	var lanes []lane
	if e := lab.Expected; e != nil {
		lanes = append(lanes, predictedLane(e))
	}
	labOK := lab.WorkCompleted != nil && strings.HasPrefix(lab.Client, "200")
	lanes = append(lanes, measuredLane(lab, "graceguard: measured", fmt.Sprintf("grace %ds, %s", lab.Grace, lab.PreStop), labOK))
	if ctl != nil {
		lanes = append(lanes, measuredLane(ctl, "no graceguard: measured", fmt.Sprintf("grace %ds, preStop %s", ctl.Grace, ctl.PreStop), false))
	}
	return lanes
}

func predictedLane(e *Timeline) lane {
	l := lane{title: "graceguard: predicted", sub: "pkg/budget NewTimeline", deadline: float64(e.Deadline)}
	l.bars = append(l.bars,
		bar{0, float64(e.SIGTERM), fmt.Sprintf("preStop sleep %gs", float64(e.Hook)), "#8fb3de", 1},
		bar{float64(e.SIGTERM), float64(e.Drained), "max-work", "#a7d3a0", 1},
		bar{float64(e.Drained), float64(e.Exited), "cleanup", "#e6cf8b", 1},
		bar{float64(e.Exited), float64(e.Deadline), "margin", "#dddddd", 1})
	l.marks = append(l.marks, marker{float64(e.SIGTERM), "SIGTERM", "#1f5fa8"})
	return l
}

// measuredLane is one deletion as measured; ok tells whether its request
// completed (a cut request is drawn red, its end marked).
func measuredLane(d *Deletion, title, sub string, ok bool) lane {
	l := lane{title: title, sub: sub, deadline: float64(d.Grace)}
	if br, drawn := requestBar(d, ok); drawn {
		l.bars = append(l.bars, br)
	}
	l.marks = append(l.marks, marker{0, "delete", "#333333"})
	add := func(a At, label, color string) {
		if a != nil {
			l.marks = append(l.marks, marker{float64(*a), label, color})
		}
	}
	add(d.EndpointNotReady, "endpoint ready=false", "#7d3c98")
	add(d.SIGTERM, "sigterm", "#1f5fa8")
	add(d.WorkCompleted, "work_completed", "#2e8b57")
	add(d.ShutdownComplete, "shutdown_complete", "#117a65")
	if !ok {
		add(d.ClientDone, "request cut", "#c0392b")
	}
	return l
}

// requestBar is the request from its admission to its answer, when both
// were observed.
func requestBar(d *Deletion, ok bool) (bar, bool) {
	if d.Admitted == nil || d.ClientDone == nil {
		return bar{}, false
	}
	short := shortAnswer(d.Client)
	c, label := "#2e8b57", fmt.Sprintf("the %gs request, admission to answer: %s, completed", float64(d.Request), short)
	if !ok {
		c, label = "#c0392b", fmt.Sprintf("the %gs request, admission to cut: %s", float64(d.Request), short)
	}
	return bar{float64(*d.Admitted), float64(*d.ClientDone), label, c, 0.35}, true
}

// shortAnswer is a client's answer cut to its class: "error (eof)" of
// "error (eof): EOF", "HTTP 200" of "200 completed".
func shortAnswer(client string) string {
	if i := strings.Index(client, ":"); strings.HasPrefix(client, "error") && i > 0 {
		return client[:i]
	}
	if f := strings.Fields(client); len(f) > 0 {
		return "HTTP " + f[0]
	}
	return client
}

// The timeline's geometry, in pixels: the plot spans left..w-right, each
// lane has labelRows rows of marker labels above its bar.
const (
	tlWidth, tlLeft, tlRight, tlTop = 960.0, 190.0, 30.0, 60.0
	tlRowH, tlLabelRows             = 14.0, 4
	tlLaneH                         = 62.0 + tlRowH*tlLabelRows
)

// timeline places seconds on the page: lo..hi is the time axis.
type timeline struct {
	lo, hi float64
	lanes  int
}

// newTimeline fits the axis around every bar, marker and deadline, half a
// second of room before and a second after.
func newTimeline(lanes []lane) timeline {
	lo, hi := 0.0, 0.0
	for _, l := range lanes {
		hi = math.Max(hi, l.deadline)
		for _, b := range l.bars {
			lo, hi = math.Min(lo, b.from), math.Max(hi, b.to)
		}
		for _, m := range l.marks {
			lo, hi = math.Min(lo, m.at), math.Max(hi, m.at)
		}
	}
	return timeline{lo: math.Floor(lo) - 0.5, hi: math.Ceil(hi) + 1, lanes: len(lanes)}
}

func (c timeline) x(t float64) float64 {
	return tlLeft + (t-c.lo)/(c.hi-c.lo)*(tlWidth-tlLeft-tlRight)
}

func (c timeline) axisY() float64 { return tlTop + tlLaneH*float64(c.lanes) + 6 }

// header opens the SVG and writes the title and what it was measured on.
func (c timeline) header(b *strings.Builder, r *Run) {
	h := tlTop + tlLaneH*float64(c.lanes) + 40
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", tlWidth, h, tlWidth, h)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("One Pod deletion during an admitted %gs request (seconds after the delete call)", float64(r.Lab.Request))
	fmt.Fprintf(b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", tlLeft-170, html.EscapeString(title))
	fmt.Fprintf(b, `<text x="%.0f" y="40" fill="#555">%s</text>`+"\n", tlLeft-170, html.EscapeString(fmt.Sprintf("measured on a real kubelet %s with containerd %s, run %s", r.Env.Kubelet, strings.TrimPrefix(r.Env.Runtime, "containerd://"), r.Started.Format("2006-01-02 15:04 UTC"))))
}

// axis draws the grid, a line and label per second (per two past 24 s),
// and the delete call's line at 0.
func (c timeline) axis(b *strings.Builder) {
	axisY := c.axisY()
	step := 1.0
	if c.hi-c.lo > 24 {
		step = 2
	}
	for t := math.Ceil(c.lo); t <= c.hi; t += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eeeeee"/>`+"\n", c.x(t), tlTop, c.x(t), axisY)
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%g</text>`+"\n", c.x(t), axisY+16, t)
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#333" stroke-width="1.5"/>`+"\n", c.x(0), tlTop-4, c.x(0), axisY)
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="end" fill="#555">s</text>`+"\n", tlWidth-tlRight+14, axisY+16)
}

// lane draws lane i: its titles, bars, deadline and marker labels.
func (c timeline) lane(b *strings.Builder, i int, l lane) {
	y0 := tlTop + tlLaneH*float64(i)
	barY := y0 + tlRowH*tlLabelRows + 8
	fmt.Fprintf(b, `<text x="10" y="%.0f" font-weight="bold">%s</text>`+"\n", barY+8, html.EscapeString(l.title))
	fmt.Fprintf(b, `<text x="10" y="%.0f" fill="#555" font-size="11">%s</text>`+"\n", barY+24, html.EscapeString(l.sub))
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#cccccc"/>`+"\n", tlLeft, barY+10, tlWidth-tlRight, barY+10)
	for _, br := range l.bars {
		c.bar(b, barY, br)
	}
	if l.deadline >= 0 {
		c.deadline(b, barY, l.deadline)
	}
	c.markers(b, y0, barY, l.marks)
}

// bar draws one bar with its label: below it for a request, inside it
// for a phase when the label fits.
func (c timeline) bar(b *strings.Builder, barY float64, br bar) {
	if br.to <= br.from {
		return
	}
	x0, x1 := c.x(br.from), c.x(br.to)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.0f" width="%.1f" height="20" fill="%s" fill-opacity="%.2f" stroke="%s" stroke-opacity="0.6"/>`+"\n",
		x0, barY, x1-x0, br.color, br.opacity, br.color)
	if br.opacity < 1 {
		// A request: label below the bar, from its start.
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" font-size="11" fill="%s">%s</text>`+"\n", x0+3, barY+34, br.color, html.EscapeString(br.label))
	} else if x1-x0 > float64(len(br.label))*6.2 {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="11">%s</text>`+"\n", (x0+x1)/2, barY+14, html.EscapeString(br.label))
	}
}

// deadline draws the dashed SIGKILL deadline, its label turned left near
// the right edge.
func (c timeline) deadline(b *strings.Builder, barY, deadline float64) {
	xd := c.x(deadline)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#c0392b" stroke-width="2" stroke-dasharray="5 3"/>`+"\n", xd, barY-6, xd, barY+26)
	anchor, tx := "start", xd+4
	if xd > tlWidth-tlRight-130 {
		anchor, tx = "end", xd-4
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.0f" fill="#c0392b" font-size="11" text-anchor="%s">SIGKILL deadline %gs</text>`+"\n", tx, barY+48, anchor, deadline)
}

// markers draws each moment on the bar, its label in the row nearest the
// bar where it does not overlap the labels already there (first fit; the
// nearest row when none is free).
func (c timeline) markers(b *strings.Builder, y0, barY float64, ms []marker) {
	marks := append([]marker(nil), ms...)
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].at < marks[j].at })
	rowEnd := make([]float64, tlLabelRows)
	for r := range rowEnd {
		rowEnd[r] = -1
	}
	for _, m := range marks {
		label := fmt.Sprintf("%s %.2fs", m.label, m.at)
		xm := c.x(m.at)
		wl := float64(len(label))*6.2 + 8
		row := freeRow(rowEnd, xm)
		rowEnd[row] = xm + wl
		ly := y0 + tlRowH*float64(row) + 12
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="%s" stroke-width="1"/>`+"\n", xm, ly+3, xm, barY+20, m.color)
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.0f" r="3.5" fill="%s"/>`+"\n", xm, barY+10, m.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" fill="%s" font-size="11">%s</text>`+"\n", xm+3, ly, m.color, html.EscapeString(label))
	}
}

// freeRow is the row nearest the bar (the last) whose labels end left of
// x, or that row when none does.
func freeRow(rowEnd []float64, x float64) int {
	for r := len(rowEnd) - 1; r >= 0; r-- {
		if rowEnd[r] < x-2 {
			return r
		}
	}
	return len(rowEnd) - 1
}
