package proxy

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/api/jsonscan"
)

// requestBody is what the proxy reads of a Messages request's body: the
// messages array and its elements, and metadata.user_id (the session, and
// for a Bearer token the account). They are found in one pass over the
// top-level object. Each pass over a 1 MB history costs about 0.1 ms, on
// every request's path, and reading each on its own took three: the
// messages array skipped whole to find its end, then walked again for its
// elements, then every member skipped again to reach the metadata.
type requestBody struct {
	arr    span   // the messages array
	els    []span // its elements
	userID string // metadata.user_id's string; "" when none
}

// readRequestBody reads body's top-level members until it has both the
// messages and the metadata: a body with no messages array, or one that
// does not parse before it, is an error; what follows both is not read
// (the upstream judges the whole body, as it would without the proxy).
// Messages past api.ProviderMaxMessages are an error too: such a body goes
// upstream as the client sent it (the upstream refuses it), and its spans
// are never held (a 32 MB body of empty messages would be 160 MB of them).
func readRequestBody(body []byte) (requestBody, error) {
	var rb requestBody
	i := jsonscan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return rb, fmt.Errorf("expected an object at offset %d", i)
	}
	haveMessages, haveMetadata := false, false
	i = jsonscan.SkipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return rb, errors.New("the body has no messages")
	}
	for !haveMessages || !haveMetadata {
		if i >= len(body) || body[i] != '"' {
			return rb, scanned(haveMessages, fmt.Errorf("expected a member name at offset %d", i))
		}
		end, ok := jsonscan.StringEnd(body, i)
		if !ok {
			return rb, scanned(haveMessages, fmt.Errorf("unterminated string at offset %d", i))
		}
		key := string(body[i+1 : end-1])
		i = jsonscan.SkipSpace(body, end)
		if i >= len(body) || body[i] != ':' {
			return rb, scanned(haveMessages, fmt.Errorf("expected ':' at offset %d", i))
		}
		i = jsonscan.SkipSpace(body, i+1)
		var vend int
		switch {
		case key == "messages" && !haveMessages:
			arr, els, err := arrayAt(body, i, api.ProviderMaxMessages)
			if err != nil {
				return rb, fmt.Errorf("messages: %w", err)
			}
			rb.arr, rb.els, haveMessages, vend = arr, els, true, arr.end
		default:
			if vend, ok = jsonscan.SkipValue(body, i); !ok {
				return rb, scanned(haveMessages, fmt.Errorf("member %q: unterminated value at offset %d", key, i))
			}
			if key == "metadata" && !haveMetadata {
				haveMetadata = true
				rb.userID = userIDOf(body, span{i, vend})
			}
		}
		i = jsonscan.SkipSpace(body, vend)
		switch {
		case i < len(body) && body[i] == ',':
			i = jsonscan.SkipSpace(body, i+1)
		case i < len(body) && body[i] == '}':
			return rb, scanned(haveMessages, errors.New("the body has no messages"))
		default:
			return rb, scanned(haveMessages, fmt.Errorf("expected ',' or '}' at offset %d", i))
		}
	}
	return rb, nil
}

// scanned is err unless the messages were read already: what follows them
// is the upstream's to judge.
func scanned(haveMessages bool, err error) error {
	if haveMessages {
		return nil
	}
	return err
}

// userIDOf is the string metadata (the value spanning md) holds in its
// user_id, "" when none.
func userIDOf(body []byte, md span) string {
	uid, ok, err := member(body, md, "user_id")
	if err != nil || !ok {
		return ""
	}
	var s string
	if json.Unmarshal(body[uid.start:uid.end], &s) != nil {
		return ""
	}
	return s
}
