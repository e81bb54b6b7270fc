package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownKeys reports every key of a YAML document that no field of t
// declares, with its full key path and line, and every value that does not
// decode into its field's type (leafError).
func unknownKeys(n *yaml.Node, t reflect.Type, path string) []error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		return unknownKeys(n.Content[0], t, path)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var errs []error
	switch t.Kind() {
	case reflect.Struct:
		if _, custom := reflect.New(t).Interface().(yaml.Unmarshaler); custom {
			return leafError(n, t, path)
		}
		if n.Kind != yaml.MappingNode {
			return leafError(n, t, path)
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			fields[name] = f.Type
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := join(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unknown key (line %d)", key, k.Line))
				continue
			}
			errs = append(errs, unknownKeys(v, ft, key)...)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return leafError(n, t, path)
		}
		for i, item := range n.Content {
			errs = append(errs, unknownKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return leafError(n, t, path)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, unknownKeys(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))...)
		}
	default:
		return leafError(n, t, path)
	}
	return errs
}

// leafError decodes a value alone into its type, so that every bad value
// is reported with its key path, not only the first one the decoder meets.
// A number with a fraction is not an integer (the decoder would truncate
// max_rows: 1.5 to 1). A bad value is then cleared: its key keeps its
// default, and the rest of the document still decodes.
func leafError(n *yaml.Node, t reflect.Type, path string) []error {
	errs := badLeaf(n, t, path)
	if len(errs) > 0 {
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
	}
	return errs
}

func badLeaf(n *yaml.Node, t reflect.Type, path string) []error {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, custom := reflect.New(t).Interface().(yaml.Unmarshaler); !custom && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!int" {
			return []error{fmt.Errorf("%s: %q is not an integer (line %d)", path, n.Value, n.Line)}
		}
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		msg := err.Error()
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			msg = strings.Join(te.Errors, "; ")
		}
		return []error{fmt.Errorf("%s: %s", path, msg)}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
