package flows

import "slices"

// Suggest returns the candidate closest to name by edit distance, if it is
// close enough to be a likely typo ("" otherwise). It is the one
// did-you-mean of weir: registration's diagnostics use it, and so do the
// refusals at run time (an unknown flow, tool or node).
func Suggest(name string, candidates []string) string {
	limit := min(max(1, len(name)/3), 3)
	best, bestD := "", limit+1
	for _, c := range slices.Sorted(slices.Values(candidates)) {
		if c == name {
			continue
		}
		if d := editDistance(name, c, limit); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance, giving up (returning limit+1)
// once it exceeds limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
