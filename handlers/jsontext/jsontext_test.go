package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendString(t *testing.T) {
	for _, tc := range []struct {
		in, keep, replace string
	}{
		{"", `""`, `""`},
		{"plain", `"plain"`, `"plain"`},
		{`a"b\c`, `"a\"b\\c"`, `"a\"b\\c"`},
		{"l1\nl2\r\t", `"l1\nl2\r\t"`, `"l1\nl2\r\t"`},
		{"\x00\x1f\x7f", `"\u0000\u001f` + "\x7f\"", `"\u0000\u001f` + "\x7f\""},
		{"é€😀", `"é€😀"`, `"é€😀"`},
		{"a\xffb", "\"a\xffb\"", `"a` + "\ufffd" + `b"`},
		{"\xe2\x82", "\"\xe2\x82\"", `"` + "\ufffd\ufffd" + `"`},
		{"<&>", `"<&>"`, `"<&>"`},
	} {
		if got := string(AppendString(nil, []byte(tc.in), false)); got != tc.keep {
			t.Errorf("%q kept: %s, want %s", tc.in, got, tc.keep)
		}
		if got := string(AppendString([]byte("x"), []byte(tc.in), true)); got != "x"+tc.replace {
			t.Errorf("%q replaced: %s, want x%s", tc.in, got, tc.replace)
		}
	}
}

// FuzzAppendString: with replaceInvalid the text is valid JSON that reads
// back as the input with invalid UTF-8 replaced; without, it is the same
// text where the input is UTF-8.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"\\\n", "\x00\xff", "é😀", "\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, []byte(s), true)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, out, err)
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); back != want && !utf8.ValidString(s) {
			// ToValidUTF8 replaces a run of invalid bytes once; the
			// writer replaces each byte: compare without the marks.
			if strings.ReplaceAll(back, "\ufffd", "") != strings.ReplaceAll(want, "\ufffd", "") {
				t.Fatalf("%q read back as %q", s, back)
			}
		} else if back != want {
			t.Fatalf("%q read back as %q", s, back)
		}
		if utf8.ValidString(s) {
			if kept := AppendString(nil, []byte(s), false); string(kept) != string(out) {
				t.Fatalf("%q: kept %s, replaced %s", s, kept, out)
			}
		}
	})
}
