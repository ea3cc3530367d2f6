package bench

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// LatencySVG renders p50 and p99 latency against offered rate for
// graceguard and the baseline: a log-scale line chart, written by hand to
// need no plotting library. The max-throughput runs have no offered rate;
// they are drawn as open markers at the throughput they reached.
func (r *Results) LatencySVG() string {
	const (
		w, h                     = 760.0, 440.0
		left, right, top, bottom = 70.0, 190.0, 48.0, 56.0
		pw, ph                   = w - left - right, h - top - bottom
	)
	type series struct {
		server, pct, color, dash string
		pts                      [][2]float64 // rate, ms
		max                      [2]float64
		hasMax                   bool
	}
	var ss []*series
	for _, server := range []struct{ name, color string }{{ServerGraceguard, "#1f5fa8"}, {ServerBaseline, "#d9730d"}} {
		for _, pct := range []struct{ name, dash string }{{"p50", ""}, {"p99", "6 4"}} {
			s := &series{server: server.name, pct: pct.name, color: server.color, dash: pct.dash}
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
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%.0f" y="24" font-size="15" font-weight="bold">Webhook latency vs offered rate (TLS, loopback, typical Pod)</text>`+"\n", left)
	if xMax == 0 || yMax == 0 {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">no load runs in this run</text></svg>`+"\n", left, top+ph/2)
		return b.String()
	}
	xStep := niceStep(xMax / 5)
	xTop := math.Ceil(xMax*1.05/xStep) * xStep
	lo, hi := math.Floor(math.Log10(yMin)), math.Ceil(math.Log10(yMax))
	if hi == lo {
		hi++
	}
	x := func(v float64) float64 { return left + v/xTop*pw }
	y := func(v float64) float64 { return top + ph - (math.Log10(v)-lo)/(hi-lo)*ph }

	// Grid and axes.
	for v := 0.0; v <= xTop+xStep/2; v += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6"/>`+"\n", x(v), top, x(v), top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`+"\n", x(v), top+ph+18, v)
	}
	for d := lo; d <= hi; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if math.Log10(v) > hi+1e-9 {
				break
			}
			stroke := "#f0f0f0"
			if m == 1 {
				stroke = "#d0d0d0"
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, y(v), left+pw, y(v), stroke)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%g</text>`+"\n", left-6, y(v), v)
		}
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">offered rate (requests/s); open markers: max-throughput run at the rate it reached</text>`+"\n", left+pw/2, h-14)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">latency (ms, log scale)</text>`+"\n", top+ph/2)

	// Series.
	for _, s := range ss {
		dash := ""
		if s.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
		}
		var pts []string
		for _, pt := range s.pts {
			if pt[1] > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt[0]), y(pt[1])))
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		}
		for _, pt := range s.pts {
			if pt[1] > 0 {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %s at %s req/s: %s ms</title></circle>`+"\n",
					x(pt[0]), y(pt[1]), s.color, s.server, s.pct, num(pt[0]), num(pt[1]))
			}
		}
		if s.hasMax && s.max[1] > 0 {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="5" fill="white" stroke="%s" stroke-width="2"><title>%s %s, max run: %s req/s, %s ms</title></circle>`+"\n",
				x(s.max[0]), y(s.max[1]), s.color, s.server, s.pct, num(s.max[0]), num(s.max[1]))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="%s" dominant-baseline="middle">max %s</text>`+"\n",
				x(s.max[0])+8, y(s.max[1]), s.color, s.pct)
		}
	}

	// Legend.
	lx, ly := left+pw+18, top+10
	for i, s := range ss {
		yy := ly + float64(i)*22
		dash := ""
		if s.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, yy, lx+30, yy, s.color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", lx+38, yy, html.EscapeString(s.server+" "+s.pct))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#555">%d CPUs, load %.2f at start</text>`+"\n",
		lx, ly+float64(len(ss))*22+10, r.Machine.NProc, r.Machine.LoadAvgStart[0])
	b.WriteString("</svg>\n")
	return b.String()
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
		case a.Arm == ArmNativePolicy:
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
