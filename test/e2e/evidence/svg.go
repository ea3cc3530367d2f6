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
	lab, ctl := r.Lab, r.Control
	type marker struct {
		at    float64
		label string
		color string
	}
	type bar struct {
		from, to float64
		label    string
		color    string
		opacity  float64
	}
	type lane struct {
		title, sub string
		bars       []bar
		marks      []marker
		deadline   float64 // SIGKILL deadline, < 0 for none
	}
	val := func(a At) (float64, bool) {
		if a == nil {
			return 0, false
		}
		return float64(*a), true
	}
	var lanes []lane

	if e := lab.Expected; e != nil {
		l := lane{title: "graceguard: predicted", sub: "pkg/budget NewTimeline", deadline: float64(e.Deadline)}
		l.bars = append(l.bars,
			bar{0, float64(e.SIGTERM), fmt.Sprintf("preStop sleep %gs", float64(e.Hook)), "#8fb3de", 1},
			bar{float64(e.SIGTERM), float64(e.Drained), "max-work", "#a7d3a0", 1},
			bar{float64(e.Drained), float64(e.Exited), "cleanup", "#e6cf8b", 1},
			bar{float64(e.Exited), float64(e.Deadline), "margin", "#dddddd", 1})
		l.marks = append(l.marks, marker{float64(e.SIGTERM), "SIGTERM", "#1f5fa8"})
		lanes = append(lanes, l)
	}
	measured := func(d *Deletion, title, sub string, ok bool) lane {
		l := lane{title: title, sub: sub, deadline: float64(d.Grace)}
		if adm, okA := val(d.Admitted); okA {
			if done, okD := val(d.ClientDone); okD {
				short := d.Client
				if i := strings.Index(short, ":"); strings.HasPrefix(short, "error") && i > 0 {
					short = short[:i]
				} else if f := strings.Fields(short); len(f) > 0 {
					short = "HTTP " + f[0]
				}
				c, label := "#2e8b57", fmt.Sprintf("the %gs request, admission to answer: %s, completed", float64(d.Request), short)
				if !ok {
					c, label = "#c0392b", fmt.Sprintf("the %gs request, admission to cut: %s", float64(d.Request), short)
				}
				l.bars = append(l.bars, bar{adm, done, label, c, 0.35})
			}
		}
		l.marks = append(l.marks, marker{0, "delete", "#333333"})
		add := func(a At, label, color string) {
			if v, ok := val(a); ok {
				l.marks = append(l.marks, marker{v, label, color})
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
	labOK := lab.WorkCompleted != nil && strings.HasPrefix(lab.Client, "200")
	lanes = append(lanes, measured(lab, "graceguard: measured", fmt.Sprintf("grace %ds, %s", lab.Grace, lab.PreStop), labOK))
	if ctl != nil {
		lanes = append(lanes, measured(ctl, "no graceguard: measured", fmt.Sprintf("grace %ds, preStop %s", ctl.Grace, ctl.PreStop), false))
	}

	// Axis range.
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
	lo, hi = math.Floor(lo)-0.5, math.Ceil(hi)+1

	const (
		w, left, right, top = 960.0, 190.0, 30.0, 60.0
		rowH, labelRows     = 14.0, 4
		laneH               = 62.0 + rowH*labelRows
	)
	h := top + laneH*float64(len(lanes)) + 40
	pw := w - left - right
	x := func(t float64) float64 { return left + (t-lo)/(hi-lo)*pw }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("One Pod deletion during an admitted %gs request (seconds after the delete call)", float64(lab.Request))
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left-170, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%.0f" y="40" fill="#555">%s</text>`+"\n", left-170, html.EscapeString(fmt.Sprintf("measured on a real kubelet %s with containerd %s, run %s", r.Env.Kubelet, strings.TrimPrefix(r.Env.Runtime, "containerd://"), r.Started.Format("2006-01-02 15:04 UTC"))))

	// Grid and axis.
	axisY := top + laneH*float64(len(lanes)) + 6
	step := 1.0
	if hi-lo > 24 {
		step = 2
	}
	for t := math.Ceil(lo); t <= hi; t += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eeeeee"/>`+"\n", x(t), top, x(t), axisY)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%g</text>`+"\n", x(t), axisY+16, t)
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#333" stroke-width="1.5"/>`+"\n", x(0), top-4, x(0), axisY)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" fill="#555">s</text>`+"\n", w-right+14, axisY+16)

	for i, l := range lanes {
		y0 := top + laneH*float64(i)
		barY := y0 + rowH*labelRows + 8
		fmt.Fprintf(&b, `<text x="10" y="%.0f" font-weight="bold">%s</text>`+"\n", barY+8, html.EscapeString(l.title))
		fmt.Fprintf(&b, `<text x="10" y="%.0f" fill="#555" font-size="11">%s</text>`+"\n", barY+24, html.EscapeString(l.sub))
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#cccccc"/>`+"\n", left, barY+10, w-right, barY+10)
		for _, br := range l.bars {
			if br.to <= br.from {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="20" fill="%s" fill-opacity="%.2f" stroke="%s" stroke-opacity="0.6"/>`+"\n",
				x(br.from), barY, x(br.to)-x(br.from), br.color, br.opacity, br.color)
			if br.opacity < 1 {
				// A request: label below the bar, from its start.
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="11" fill="%s">%s</text>`+"\n", x(br.from)+3, barY+34, br.color, html.EscapeString(br.label))
			} else if x(br.to)-x(br.from) > float64(len(br.label))*6.2 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="11">%s</text>`+"\n", (x(br.from)+x(br.to))/2, barY+14, html.EscapeString(br.label))
			}
		}
		if l.deadline >= 0 {
			xd := x(l.deadline)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#c0392b" stroke-width="2" stroke-dasharray="5 3"/>`+"\n", xd, barY-6, xd, barY+26)
			anchor, tx := "start", xd+4
			if xd > w-right-130 {
				anchor, tx = "end", xd-4
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#c0392b" font-size="11" text-anchor="%s">SIGKILL deadline %gs</text>`+"\n", tx, barY+48, anchor, l.deadline)
		}
		// Marker labels in rows above the bar, first fit.
		marks := append([]marker(nil), l.marks...)
		sort.SliceStable(marks, func(a, c int) bool { return marks[a].at < marks[c].at })
		rowEnd := make([]float64, labelRows)
		for r := range rowEnd {
			rowEnd[r] = -1
		}
		for _, m := range marks {
			label := fmt.Sprintf("%s %.2fs", m.label, m.at)
			xm := x(m.at)
			wl := float64(len(label))*6.2 + 8
			row := labelRows - 1
			for r := labelRows - 1; r >= 0; r-- {
				if rowEnd[r] < xm-2 {
					row = r
					break
				}
			}
			rowEnd[row] = xm + wl
			ly := y0 + rowH*float64(row) + 12
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="%s" stroke-width="1"/>`+"\n", xm, ly+3, xm, barY+20, m.color)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.0f" r="3.5" fill="%s"/>`+"\n", xm, barY+10, m.color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="%s" font-size="11">%s</text>`+"\n", xm+3, ly, m.color, html.EscapeString(label))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
