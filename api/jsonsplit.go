package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// splitObject walks the top level of a JSON object and calls fn with each
// key (decoded) and its value's raw bytes (a subslice of b: nothing is
// copied or re-encoded). Nested values are skipped by matching brackets
// and strings, not validated: a value that matters is validated by whoever
// decodes it (json.Unmarshal for the small fields, binding's parser for the
// request). A duplicate top-level key is an error.
func splitObject(b []byte, fn func(key string, val []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errors.New("body is not a JSON object")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		if j := skipSpace(b, i+1); j != len(b) {
			return fmt.Errorf("unexpected data after the object at offset %d", j)
		}
		return nil
	}
	seen := make(map[string]struct{}, 8)
	for {
		if i >= len(b) || b[i] != '"' {
			return fmt.Errorf("expected a key at offset %d", i)
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		var key string
		if err := json.Unmarshal(b[i:end], &key); err != nil {
			return fmt.Errorf("key at offset %d: %w", i, err)
		}
		if _, dup := seen[key]; dup {
			return fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = struct{}{}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return fmt.Errorf("expected ':' after key %q", key)
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return fmt.Errorf("value of %q: %w", key, err)
		}
		if err := fn(key, b[i:vend]); err != nil {
			return err
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return errors.New("unexpected end of the object")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			if j := skipSpace(b, i+1); j != len(b) {
				return fmt.Errorf("unexpected data after the object at offset %d", j)
			}
			return nil
		default:
			return fmt.Errorf("expected ',' or '}' at offset %d", i)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset just after the string starting at b[i].
// It jumps from quote to quote (bytes.IndexByte is vectorized) and counts
// the backslashes before each to tell an escaped quote from the end.
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, fmt.Errorf("unterminated string at offset %d", i)
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// skipValue returns the offset just after the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("missing value")
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unterminated value at offset %d", i)
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return 0, fmt.Errorf("missing value at offset %d", i)
				}
				return j, nil
			}
			j++
		}
		if j == i {
			return 0, fmt.Errorf("missing value at offset %d", i)
		}
		return j, nil
	}
}
