package deadletter_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cdclake/cdclake/sinks"
	"github.com/cdclake/cdclake/sinks/deadletter"
)

// store keeps written objects, or fails.
type store struct {
	objects map[string][]byte
	fail    error
}

func (s *store) WriteObject(_ context.Context, key string, data []byte, contentType string) error {
	if s.fail != nil {
		return s.fail
	}
	if contentType != "application/x-ndjson" {
		return errors.New("content type " + contentType)
	}
	s.objects[key] = bytes.Clone(data)
	return nil
}

func TestQueue(t *testing.T) {
	st := &store{objects: map[string][]byte{}}
	q := deadletter.New(deadletter.Lake(st))
	at := func(off int64) sinks.Position {
		return sinks.Position{Source: "orders/topic", Partition: 3, Offset: off}
	}
	q.Add(at(17), "decode", errors.New("malformed message: no op"), []byte("k17"), []byte(`{"x":1}`),
		[]deadletter.Header{{Key: "ce_type", Value: []byte("row")}, {Key: "bin", Value: []byte{0xfe}}})
	q.Add(at(19), "convert", errors.New("column \"A\": not a number"), nil, []byte{0xff, 'a', 0}, nil)
	if q.Pending() != 2 {
		t.Fatalf("pending %d", q.Pending())
	}
	if err := q.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q.Pending() != 0 || q.Total() != 2 {
		t.Errorf("pending %d total %d after flush", q.Pending(), q.Total())
	}
	// One object per message, named from its position like data files.
	lines := [][]byte{st.objects["_dead_letter/orders_topic-p3-o00000000000000000017.ndjson"],
		st.objects["_dead_letter/orders_topic-p3-o00000000000000000019.ndjson"]}
	if len(st.objects) != 2 || lines[0] == nil || lines[1] == nil {
		t.Fatalf("objects %v", st.objects)
	}
	var e0, e1 deadletter.Entry
	if err := json.Unmarshal(lines[0], &e0); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &e1); err != nil {
		t.Fatal(err)
	}
	if e0.Source != "orders/topic" || e0.Partition != 3 || e0.Offset != 17 || e0.Stage != "decode" ||
		e0.Reason != "malformed message: no op" || e0.Value == nil || *e0.Value != `{"x":1}` ||
		e0.Key == nil || *e0.Key != "k17" || len(e0.Headers) != 2 || *e0.Headers[0].Value != "row" ||
		e0.Headers[1].Value != nil || e0.Headers[1].ValueBase64 != "/g==" {
		t.Errorf("entry 0 = %+v", e0)
	}
	if e1.Key != nil || e1.KeyBase64 != "" || e1.Headers != nil {
		t.Errorf("entry 1 has a key or headers: %+v", e1)
	}
	// Invalid UTF-8 has no text value; the base64 value is exact.
	raw, err := base64.StdEncoding.DecodeString(e1.ValueBase64)
	if e1.Value != nil || err != nil || !bytes.Equal(raw, []byte{0xff, 'a', 0}) || e1.Offset != 19 {
		t.Errorf("entry 1 = %+v (%v)", e1, err)
	}
	// Nothing pending: nothing written.
	if err := q.Flush(context.Background()); err != nil || len(st.objects) != 2 {
		t.Errorf("empty flush: %v, %d objects", err, len(st.objects))
	}
}

func TestQueueKeepsEntriesWhenTheStoreFails(t *testing.T) {
	st := &store{objects: map[string][]byte{}, fail: errors.New("store down")}
	q := deadletter.New(deadletter.Lake(st))
	q.Add(sinks.Position{Source: "s", Offset: 5}, "unwrap", errors.New("not JSON"), nil, []byte("{"), nil)
	if err := q.Flush(context.Background()); err == nil {
		t.Fatal("flush into a failing store succeeded")
	}
	if q.Pending() != 1 || q.Total() != 0 {
		t.Fatalf("pending %d total %d after a failed flush", q.Pending(), q.Total())
	}
	st.fail = nil
	if err := q.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.objects["_dead_letter/s-p0-o00000000000000000005.ndjson"]; !ok || q.Total() != 1 {
		t.Errorf("retry wrote %v", st.objects)
	}
	q.Add(sinks.Position{Source: "s", Offset: 9}, "unwrap", errors.New("x"), nil, []byte("{"), nil)
	q.Reset()
	if q.Pending() != 0 {
		t.Error("Reset kept entries")
	}
}

func TestBound(t *testing.T) {
	long := strings.Repeat("é", 2000) // 4000 bytes
	got := deadletter.Bound(long)
	if len(got) > deadletter.MaxReason || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("Bound: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if deadletter.Bound("short") != "short" {
		t.Error("a short reason changed")
	}
}
