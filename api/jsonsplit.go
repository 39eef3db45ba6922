package api

import (
	"errors"
	"fmt"

	"github.com/my-pi/bindery/api/jsonscan"
)

// splitObject walks the top level of a JSON object and calls fn with each
// key (decoded) and its value's raw bytes (a subslice of b: nothing is
// copied or re-encoded). Nested values are skipped by matching brackets
// and strings, not validated: a value that matters is validated by whoever
// decodes it (json.Unmarshal for the small fields, binding's parser for the
// request). A duplicate top-level key is an error.
func splitObject(b []byte, fn func(key string, val []byte) error) error {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errors.New("body is not a JSON object")
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		if j := jsonscan.SkipSpace(b, i+1); j != len(b) {
			return fmt.Errorf("unexpected data after the object at offset %d", j)
		}
		return nil
	}
	seen := make(map[string]struct{}, 8)
	for {
		if i >= len(b) || b[i] != '"' {
			return fmt.Errorf("expected a key at offset %d", i)
		}
		end, ok := jsonscan.StringEnd(b, i)
		if !ok {
			return fmt.Errorf("unterminated string at offset %d", i)
		}
		key, err := jsonscan.Unescape(b[i+1 : end-1])
		if err != nil {
			return fmt.Errorf("key at offset %d: %w", i, err)
		}
		if _, dup := seen[key]; dup {
			return fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = struct{}{}
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return fmt.Errorf("expected ':' after key %q", key)
		}
		i = jsonscan.SkipSpace(b, i+1)
		vend, ok := jsonscan.SkipValue(b, i)
		switch {
		case !ok && vend == i:
			return fmt.Errorf("value of %q: missing value at offset %d", key, i)
		case !ok:
			return fmt.Errorf("value of %q: unterminated value at offset %d", key, i)
		}
		if err := fn(key, b[i:vend]); err != nil {
			return err
		}
		i = jsonscan.SkipSpace(b, vend)
		if i >= len(b) {
			return errors.New("unexpected end of the object")
		}
		switch b[i] {
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		case '}':
			if j := jsonscan.SkipSpace(b, i+1); j != len(b) {
				return fmt.Errorf("unexpected data after the object at offset %d", j)
			}
			return nil
		default:
			return fmt.Errorf("expected ',' or '}' at offset %d", i)
		}
	}
}
