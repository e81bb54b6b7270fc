package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Key describes one configuration key.
type Key struct {
	// Path is the key's path: source.kafka.group, routes[].match,
	// source.goldengate.<property>.
	Path string
	// Type is the kind of value the key takes (string, integer, size, …).
	Type string
	// Default is the value the key has when it is not given, as YAML; ""
	// when it has none.
	Default string
	// Doc says what the key does; Example is a value to show.
	Doc, Example string
}

// Keys lists every configuration key, in the order of the Config type.
// docs/configuration.md is made from it (a test keeps the two equal).
func Keys() []Key {
	var keys []Key
	walkKeys(reflect.TypeOf(Config{}), reflect.ValueOf(Default), "", &keys)
	for i := range keys {
		d := keyDocs[keys[i].Path]
		keys[i].Doc, keys[i].Example = d.doc, d.example
	}
	return keys
}

func walkKeys(t reflect.Type, def reflect.Value, path string, keys *[]Key) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		p := join(path, name)
		if p == "defaults.match" {
			continue // routes only
		}
		fv := def.Field(i)
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && !isLeaf(ft):
			walkKeys(ft, fv, p, keys)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			// routes: each takes the keys of defaults, whose values it
			// inherits.
			*keys = append(*keys, Key{Path: p, Type: "list of " + name})
			from := len(*keys)
			walkKeys(ft.Elem(), reflect.ValueOf(Route{}), p+"[]", keys)
			for j := range (*keys)[from:] {
				if k := &(*keys)[from+j]; k.Path != "routes[].match" {
					k.Default = "defaults." + strings.TrimPrefix(k.Path, "routes[].")
				}
			}
		case ft.Kind() == reflect.Map:
			*keys = append(*keys, Key{Path: p, Type: "map of " + typeName(ft.Elem()) + "s", Default: defaultText(fv)})
		default:
			*keys = append(*keys, Key{Path: p, Type: typeName(ft), Default: defaultText(fv)})
		}
	}
}

// isLeaf reports whether a struct type is one value (it parses itself).
func isLeaf(t reflect.Type) bool {
	return t == reflect.TypeOf(Limit{})
}

func typeName(t reflect.Type) string {
	switch t {
	case reflect.TypeOf(Size(0)):
		return "size"
	case reflect.TypeOf(Duration(0)):
		return "duration"
	case reflect.TypeOf(Limit{}):
		return "count or fraction"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Slice:
		return "list of " + typeName(t.Elem()) + "s"
	}
	return t.String()
}

func defaultText(v reflect.Value) string {
	if v.Kind() == reflect.Bool {
		return fmt.Sprint(v.Bool())
	}
	if v.IsZero() {
		return ""
	}
	switch x := v.Interface().(type) {
	case Size:
		return sizeText(int64(x))
	case Duration:
		return durationText(time.Duration(x))
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+": "+x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []string:
		return "[" + strings.Join(x, ", ") + "]"
	}
	return fmt.Sprint(v.Interface())
}

// sizeText writes a size with the largest binary unit that divides it.
func sizeText(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return fmt.Sprint(n)
}

// durationText writes a duration without zero trailing units (5m, not
// 5m0s).
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Reference writes the configuration reference (docs/configuration.md) in
// Markdown: a table of keys per top-level section.
func Reference() string {
	var b strings.Builder
	b.WriteString(`# Configuration reference

<!-- Made from config.Keys by "make docs"; a test fails when the two differ. -->

cdclake reads one YAML file (` + "`--config`" + `). Every key is optional; a key left out
takes the default below. ` + "`cdclake validate FILE`" + ` checks a file as ` + "`cdclake run`" + ` would,
and reports every problem with its key path.

- **Sizes** are a byte count or a number with a unit: ` + "`134217728`, `128MiB`, `64MB`, `1GiB`" + `.
- **Durations** are Go durations: ` + "`500ms`, `30s`, `5m`, `1h`" + `.
- **Environment variables** are read anywhere in a value: ` + "`${NAME}`" + ` (an unset
  variable is an error), ` + "`${NAME:-default}`" + ` (the default when it is unset or
  empty), and ` + "`$$`" + ` for a literal ` + "`$`" + `. An unquoted value takes the type of
  what it becomes (` + "`max_rows: ${ROWS}`" + ` is an integer).
- **Secrets** never go in the file: passwords are named by ` + "`password_env`" + ` (an
  environment variable) or ` + "`password_file`" + `, and a URL with a password is refused.

`)
	section := ""
	for _, k := range Keys() {
		top, _, _ := strings.Cut(k.Path, ".")
		top, _, _ = strings.Cut(top, "[")
		if top != section {
			section = top
			fmt.Fprintf(&b, "\n## `%s`\n\n| key | type | default | meaning | example |\n|---|---|---|---|---|\n", top)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.Path, k.Type, code(k.Default), cell(k.Doc), code(k.Example))
	}
	return b.String()
}

func code(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + cell(s) + "`"
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
