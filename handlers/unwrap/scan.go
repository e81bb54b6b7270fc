package unwrap

// Fast structural scanning of a JSON object's top level, used to find the
// Kafka Connect envelope's "schema" and "payload" members without parsing
// the schema each time: a connector sends the same schema text with every
// message of a table.

// skipWS returns the index of the first non-space byte at or after i.
func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"',
// or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the JSON value starting at b[i], or
// -1 when the text is malformed. It checks structure only; the parser that
// later reads the value validates it fully.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j)
				if j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			return j
		}
		j++
	}
	return j
}

// envelopeSpans reports whether b is an object with exactly the members
// "schema" and "payload" (in either order, keys without escapes), and
// returns the spans of their values.
func envelopeSpans(b []byte) (schema, payload []byte, ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, nil, false
	}
	i++
	for n := 0; ; n++ {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' || n == 2 {
			return nil, nil, false
		}
		end := skipString(b, i)
		if end < 0 {
			return nil, nil, false
		}
		key := b[i+1 : end-1]
		if string(key) != "schema" && string(key) != "payload" {
			// Not an envelope: no need to read on.
			return nil, nil, false
		}
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, nil, false
		}
		i = skipWS(b, i+1)
		vend := skipValue(b, i)
		if vend < 0 {
			return nil, nil, false
		}
		switch string(key) {
		case "schema":
			if schema != nil {
				return nil, nil, false
			}
			schema = b[i:vend]
		case "payload":
			if payload != nil {
				return nil, nil, false
			}
			payload = b[i:vend]
		default:
			return nil, nil, false
		}
		i = skipWS(b, vend)
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i < len(b) && b[i] == '}' && schema != nil && payload != nil && skipWS(b, i+1) == len(b) {
			return schema, payload, true
		}
		return nil, nil, false
	}
}
