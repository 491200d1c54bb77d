package harness

import (
	"bufio"
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Histogram is one series of a Prometheus histogram as scraped: the cumulative count of
// observations by upper bound (le), +Inf included.
type Histogram map[float64]float64

// ParseHistogram reads the buckets of histogram name (without _bucket) whose labels include sel
// (`controller="valkeycluster"`, say) from a Prometheus text exposition.
func ParseHistogram(body []byte, name, sel string) Histogram {
	h := Histogram{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"_bucket{") || !strings.Contains(line, sel) {
			continue
		}
		_, rest, ok := strings.Cut(line, `le="`)
		if !ok {
			continue
		}
		le, rest, _ := strings.Cut(rest, `"`)
		bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		if err != nil {
			continue
		}
		_, val, _ := strings.Cut(rest, "} ")
		if f := strings.Fields(val); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				h[bound] = v
			}
		}
	}
	return h
}

// Quantiles returns the median and the 99th percentile, in milliseconds, of the observations
// made between two scrapes of a histogram in seconds, and how many there were. As Prometheus'
// histogram_quantile over an increase: linear within the bucket the rank falls in, from 0 in
// the first; a rank in the +Inf bucket is the largest finite bound.
func Quantiles(before, after Histogram) (p50, p99 float64, n int) {
	total := after[math.Inf(1)] - before[math.Inf(1)]
	if total <= 0 {
		return 0, 0, 0
	}
	bounds := make([]float64, 0, len(after))
	for le := range after {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	quantile := func(q float64) float64 {
		rank := q * total
		prevBound, prevCount := 0.0, 0.0
		for _, le := range bounds {
			c := after[le] - before[le]
			if c >= rank {
				if math.IsInf(le, 1) {
					return prevBound * 1000
				}
				return 1000 * (prevBound + (le-prevBound)*(rank-prevCount)/(c-prevCount))
			}
			prevBound, prevCount = le, c
		}
		return prevBound * 1000
	}
	return quantile(0.5), quantile(0.99), int(total)
}
