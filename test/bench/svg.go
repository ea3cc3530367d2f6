package bench

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// The latency chart's size and margins.
const (
	latW, latH                           = 760.0, 440.0
	latLeft, latRight, latTop, latBottom = 70.0, 190.0, 48.0, 56.0
	latPW, latPH                         = latW - latLeft - latRight, latH - latTop - latBottom
)

// latencySeries is one line of the latency chart: a server's p50 or p99
// at each offered rate, and at the throughput of its max run.
type latencySeries struct {
	server, pct, color, dash string
	pts                      [][2]float64 // rate, ms
	max                      [2]float64
	hasMax                   bool
}

// dashAttr is the series' stroke-dasharray attribute, if it is dashed.
func (s *latencySeries) dashAttr() string {
	if s.dash == "" {
		return ""
	}
	return fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
}

// latencyAxes maps rates and latencies to the chart: linear in x up to
// xTop, logarithmic in y over the decades lo to hi.
type latencyAxes struct{ xTop, xStep, lo, hi float64 }

func (a latencyAxes) x(v float64) float64 { return latLeft + v/a.xTop*latPW }
func (a latencyAxes) y(v float64) float64 {
	return latTop + latPH - (math.Log10(v)-a.lo)/(a.hi-a.lo)*latPH
}

// LatencySVG renders p50 and p99 latency against offered rate for
// graceguard and the baseline: a log-scale line chart, written by hand to
// need no plotting library. The max-throughput runs have no offered rate;
// they are drawn as open markers at the throughput they reached.
func (r *Results) LatencySVG() string {
	ss := r.latencySeries()
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", latW, latH, latW, latH)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", latW, latH)
	fmt.Fprintf(&b, `<text x="%.0f" y="24" font-size="15" font-weight="bold">Webhook latency vs offered rate (TLS, loopback, typical Pod)</text>`+"\n", latLeft)
	ax, ok := latencyAxesOf(ss)
	if !ok {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">no load runs in this run</text></svg>`+"\n", latLeft, latTop+latPH/2)
		return b.String()
	}
	ax.grid(&b)
	for _, s := range ss {
		ax.series(&b, s)
	}
	latencyLegend(&b, ss, r.Machine)
	b.WriteString("</svg>\n")
	return b.String()
}

func (r *Results) latencySeries() []*latencySeries {
	var ss []*latencySeries
	for _, server := range []struct{ name, color string }{{ServerGraceguard, "#1f5fa8"}, {ServerBaseline, "#d9730d"}} {
		for _, pct := range []struct{ name, dash string }{{"p50", ""}, {"p99", "6 4"}} {
			s := &latencySeries{server: server.name, pct: pct.name, color: server.color, dash: pct.dash}
			for _, l := range r.Load {
				if l.Server != server.name {
					continue
				}
				v := l.Latency.P50
				if pct.name == "p99" {
					v = l.Latency.P99
				}
				if l.Rate == 0 {
					s.max, s.hasMax = [2]float64{l.Throughput, v}, true
					continue
				}
				s.pts = append(s.pts, [2]float64{float64(l.Rate), v})
			}
			ss = append(ss, s)
		}
	}
	return ss
}

// latencyAxesOf fits the axes to the series; false when there is nothing
// to draw.
func latencyAxesOf(ss []*latencySeries) (latencyAxes, bool) {
	xMax, yMin, yMax := 0.0, math.Inf(1), 0.0
	for _, s := range ss {
		all := s.pts
		if s.hasMax {
			all = append(all[:len(all):len(all)], s.max)
		}
		for _, pt := range all {
			xMax = max(xMax, pt[0])
			if pt[1] > 0 {
				yMin, yMax = min(yMin, pt[1]), max(yMax, pt[1])
			}
		}
	}
	if xMax == 0 || yMax == 0 {
		return latencyAxes{}, false
	}
	xStep := niceStep(xMax / 5)
	a := latencyAxes{xTop: math.Ceil(xMax*1.05/xStep) * xStep, xStep: xStep, lo: math.Floor(math.Log10(yMin)), hi: math.Ceil(math.Log10(yMax))}
	if a.hi == a.lo {
		a.hi++
	}
	return a, true
}

// grid draws the grid lines, the axes and their labels.
func (a latencyAxes) grid(b *strings.Builder) {
	for v := 0.0; v <= a.xTop+a.xStep/2; v += a.xStep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6"/>`+"\n", a.x(v), latTop, a.x(v), latTop+latPH)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`+"\n", a.x(v), latTop+latPH+18, v)
	}
	for d := a.lo; d <= a.hi; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if math.Log10(v) > a.hi+1e-9 {
				break
			}
			stroke := "#f0f0f0"
			if m == 1 {
				stroke = "#d0d0d0"
			}
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", latLeft, a.y(v), latLeft+latPW, a.y(v), stroke)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%g</text>`+"\n", latLeft-6, a.y(v), v)
		}
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", latLeft, latTop, latPW, latPH)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">offered rate (requests/s); open markers: max-throughput run at the rate it reached</text>`+"\n", latLeft+latPW/2, latH-14)
	fmt.Fprintf(b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">latency (ms, log scale)</text>`+"\n", latTop+latPH/2)
}

// series draws one series: its line, its points and its max run.
func (a latencyAxes) series(b *strings.Builder, s *latencySeries) {
	var pts []string
	for _, pt := range s.pts {
		if pt[1] > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", a.x(pt[0]), a.y(pt[1])))
		}
	}
	if len(pts) > 1 {
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, s.dashAttr())
	}
	for _, pt := range s.pts {
		if pt[1] > 0 {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %s at %s req/s: %s ms</title></circle>`+"\n",
				a.x(pt[0]), a.y(pt[1]), s.color, s.server, s.pct, num(pt[0]), num(pt[1]))
		}
	}
	if s.hasMax && s.max[1] > 0 {
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="5" fill="white" stroke="%s" stroke-width="2"><title>%s %s, max run: %s req/s, %s ms</title></circle>`+"\n",
			a.x(s.max[0]), a.y(s.max[1]), s.color, s.server, s.pct, num(s.max[0]), num(s.max[1]))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" fill="%s" dominant-baseline="middle">max %s</text>`+"\n",
			a.x(s.max[0])+8, a.y(s.max[1]), s.color, s.pct)
	}
}

func latencyLegend(b *strings.Builder, ss []*latencySeries, m Machine) {
	lx, ly := latLeft+latPW+18, latTop+10
	for i, s := range ss {
		yy := ly + float64(i)*22
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, yy, lx+30, yy, s.color, s.dashAttr())
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", lx+38, yy, html.EscapeString(s.server+" "+s.pct))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11" fill="#555">%d CPUs, load %.2f at start</text>`+"\n",
		lx, ly+float64(len(ss))*22+10, m.NProc, m.LoadAvgStart[0])
}

// niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// ArmsSVG renders the Pod creation arms: a bar of Pods/s per arm with the
// range of its rounds as a whisker, and its p50 and p99 latency as text.
func (r *Results) ArmsSVG() string {
	c := r.Creation
	const left, right, top, rowH = 190.0, 170.0, 56.0, 34.0
	n := 0
	if c != nil {
		n = len(c.Arms)
	}
	w, h := 760.0, top+rowH*float64(max(n, 1))+56
	pw := w - left - right
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="20" y="24" font-size="15" font-weight="bold">Pod creation through one kube-apiserver, by arm (typical Pod)</text>`+"\n")
	if n == 0 {
		fmt.Fprintf(&b, `<text x="20" y="%.0f">no Pod creation in this run</text></svg>`+"\n", top+20)
		return b.String()
	}
	xMax := 0.0
	for _, a := range c.Arms {
		xMax = max(xMax, a.PodsPerSec)
		for _, v := range a.RoundPodsPerSec {
			xMax = max(xMax, v)
		}
	}
	if xMax == 0 {
		xMax = 1
	}
	step := niceStep(xMax / 5)
	xTop := math.Ceil(xMax*1.05/step) * step
	x := func(v float64) float64 { return left + v/xTop*pw }
	bottom := top + rowH*float64(n)
	for v := 0.0; v <= xTop+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6"/>`+"\n", x(v), top-6, x(v), bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`+"\n", x(v), bottom+16, v)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">Pods/s (bar: all rounds; whisker: slowest to fastest round)</text>`+"\n", left+pw/2, bottom+38)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#555">p50 / p99 (ms)</text>`+"\n", left+pw+12, top-12)
	for i, a := range c.Arms {
		y := top + rowH*float64(i)
		color := "#9aa5b1"
		switch {
		case a.Arm == ArmGraceguard:
			color = "#1f5fa8"
		case strings.HasPrefix(a.Arm, "graceguard"):
			color = "#6f9bd1"
		case a.Arm == ArmNativePolicy, a.Arm == ArmNativeOneMutation:
			color = "#2e8b57"
		case strings.HasPrefix(a.Arm, "noop"):
			color = "#d9730d"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-8, y+rowH/2-2, html.EscapeString(a.Arm))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s Pods/s</title></rect>`+"\n",
			left, y+6, x(a.PodsPerSec)-left, rowH-16, color, html.EscapeString(a.Arm), num(a.PodsPerSec))
		if _, lo, hi := spread(a.RoundPodsPerSec); hi > 0 {
			ym := y + rowH/2 - 2
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(lo), ym, x(hi), ym)
			for _, v := range []float64{lo, hi} {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(v), ym-5, x(v), ym+5)
			}
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s / %s</text>`+"\n", left+pw+12, y+rowH/2-2, num(a.Latency.P50), num(a.Latency.P99))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#555">%d CPUs, load %.2f at start</text>`+"\n", left+pw+12, bottom+38, r.Machine.NProc, r.Machine.LoadAvgStart[0])
	b.WriteString("</svg>\n")
	return b.String()
}
