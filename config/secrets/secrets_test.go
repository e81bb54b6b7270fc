package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	t.Setenv("CDCLAKE_TEST_SECRET", "s3cr3t-from-env")
	v, err := Read("a.password_env", "CDCLAKE_TEST_SECRET", "a.password_file", "")
	if err != nil || v != "s3cr3t-from-env" {
		t.Fatalf("Read = %q, %v", v, err)
	}
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := Read("a.password_env", "", "a.password_file", file); err != nil || v != "from-a-file" {
		t.Fatalf("Read(file) = %q, %v", v, err)
	}
	var missing *MissingError
	_, err = Read("a.password_env", "CDCLAKE_TEST_UNSET_VARIABLE", "", "")
	if !errors.As(err, &missing) || missing.Key != "a.password_env" || !strings.Contains(err.Error(), "CDCLAKE_TEST_UNSET_VARIABLE is not set") {
		t.Errorf("unset variable: %v", err)
	}
	_, err = Read("", "", "a.password_file", file+".gone")
	if !errors.As(err, &missing) || missing.Key != "a.password_file" {
		t.Errorf("absent file: %v", err)
	}
	if _, err := ReadFile("k", t.TempDir()); err == nil || errors.As(err, &missing) {
		t.Errorf("a folder is an error, not a missing file: %v", err)
	}
	line := Redact("dial failed with s3cr3t-from-env and from-a-file")
	if strings.Contains(line, "s3cr3t") || strings.Contains(line, "from-a-file") || strings.Count(line, Placeholder) != 2 {
		t.Errorf("Redact = %q", line)
	}
}

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"kafka://user:pw@broker:9092/t?group=g":              "kafka://" + Placeholder + "@broker:9092/t?group=g",
		"opening https://u:p@registry/x failed":              "opening https://" + Placeholder + "@registry/x failed",
		"s3://b?region=x&aws_secret=abc&endpoint=http://h:1": "s3://b?region=x&aws_secret=" + Placeholder + "&endpoint=http://h:1",
		"az://c?sig=abc%2Fdef&sv=2020":                       "az://c?sig=" + Placeholder + "&sv=2020",
		"kafka://b/t?sasl_password_env=PW&sasl_user=u":       "kafka://b/t?sasl_password_env=PW&sasl_user=u",
		"user@example.com wrote":                             "user@example.com wrote",
		"kafka://b/t?group=g&token=xyz":                      "kafka://b/t?group=g&token=" + Placeholder,
		`{"url":"https://a:b@h/p","x":1}`:                    `{"url":"https://` + Placeholder + `@h/p","x":1}`,
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
