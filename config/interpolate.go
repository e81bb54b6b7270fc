package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// interpolate replaces, in every scalar value of a YAML document, ${NAME}
// with the environment variable NAME and ${NAME:-default} with it or, when
// it is unset or empty, default; $$ is a literal $. An unset ${NAME}
// without a default is an error naming its key. A plain scalar takes the
// type of what it becomes (max_rows: ${ROWS} is an integer), a quoted one
// stays text.
func interpolate(n *yaml.Node, path string, lookup func(string) (string, bool)) []error {
	var errs []error
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			errs = append(errs, interpolate(c, path, lookup)...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, interpolate(n.Content[i+1], join(path, n.Content[i].Value), lookup)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			errs = append(errs, interpolate(c, fmt.Sprintf("%s[%d]", path, i), lookup)...)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		v, err := Expand(n.Value, lookup)
		if err != nil {
			return []error{fmt.Errorf("%s: %w (line %d)", path, err, n.Line)}
		}
		if v != n.Value && n.Style == 0 {
			n.Tag = "" // resolved again from the new value
		}
		n.Value = v
	}
	return errs
}

// Expand replaces ${NAME}, ${NAME:-default} and $$ in s (see interpolate).
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			s = s[i+2:]
			continue
		case '{':
		default:
			b.WriteByte('$')
			s = s[i+1:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed ${ in %q", s[i:])
		}
		expr := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validName(name) {
			return "", fmt.Errorf("${%s}: not a variable name", expr)
		}
		v, ok := lookup(name)
		switch {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", fmt.Errorf("${%s}: the environment variable %s is not set (give a default with ${%s:-value})", name, name, name)
		}
	}
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && !(r >= 'A' && r <= 'Z') && !(r >= 'a' && r <= 'z') && !(i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
