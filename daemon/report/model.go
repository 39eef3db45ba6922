package report

import (
	"strconv"
	"strings"
)

// ModelKey is a Claude model reduced to family and version, the unit the
// regime and price tables are keyed by: "sonnet-4.5", "opus-3.0",
// "mythos-preview". Dated snapshots, provider prefixes (Bedrock's
// "us.anthropic.") and suffixes ("-v1:0") map to the same key. A model that
// is not recognisably Claude keeps its id, lower-cased.
func ModelKey(model string) string {
	fam, major, minor, ok := parseClaude(model)
	if !ok {
		return strings.ToLower(model)
	}
	if major < 0 {
		return fam + "-preview"
	}
	return fam + "-" + strconv.Itoa(major) + "." + strconv.Itoa(minor)
}

// parseClaude reads "claude-sonnet-4-5-20250929", "claude-3-7-sonnet-…",
// "claude-opus-4-20250514" (4.0) and "claude-mythos-preview" (major -1).
func parseClaude(model string) (family string, major, minor int, ok bool) {
	s := strings.ToLower(model)
	i := strings.Index(s, "claude-")
	if i < 0 {
		return "", 0, 0, false
	}
	var nums []int
	for _, tok := range strings.Split(s[i+len("claude-"):], "-") {
		switch tok {
		case "opus", "sonnet", "haiku", "fable", "mythos":
			if family != "" {
				return "", 0, 0, false
			}
			family = tok
			continue
		case "preview":
			if family != "" && len(nums) == 0 {
				return family, -1, 0, true
			}
		}
		// A version part has one or two digits; a date (20250929) or a
		// suffix (v1:0) ends the version.
		n, err := strconv.Atoi(tok)
		if err != nil || len(tok) > 2 {
			if family != "" {
				break
			}
			continue
		}
		if len(nums) < 2 && (family == "" || len(nums) < 2) {
			nums = append(nums, n)
		}
	}
	if family == "" || len(nums) == 0 {
		return "", 0, 0, false
	}
	if len(nums) == 1 {
		nums = append(nums, 0)
	}
	return family, nums[0], nums[1], true
}

// RegimeOf places a model in its thinking regime.
func RegimeOf(model string) Regime {
	fam, major, minor, ok := parseClaude(model)
	if !ok {
		return UnknownRegime
	}
	v := major*100 + minor
	switch fam {
	case "haiku":
		if major >= 0 && v <= 405 {
			return LastTurnOnly
		}
	case "sonnet":
		if v <= 405 {
			return LastTurnOnly
		}
		return KeepAll
	case "opus":
		if v <= 401 {
			return LastTurnOnly
		}
		return KeepAll
	case "fable", "mythos":
		if major < 0 || v <= 501 {
			return KeepAll
		}
	}
	return UnknownRegime
}
