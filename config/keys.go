package config

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownKeys reports every key of a YAML document that no field of t
// declares, with its full key path and line.
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
		if n.Kind != yaml.MappingNode {
			return nil // the decoder reports the type error
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
		if _, custom := reflect.New(t).Interface().(yaml.Unmarshaler); custom {
			return nil
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
			return nil
		}
		for i, item := range n.Content {
			errs = append(errs, unknownKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return errs
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
