package debezium

import (
	"errors"
	"math"

	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/valyala/fastjson"
)

// sourceFields holds the recognised fields of a source block.
type sourceFields struct {
	db, schema, table                      *fastjson.Value
	tsMs, tsUs                             *fastjson.Value
	txID, xid, gtid                        *fastjson.Value
	file, pos, row                         *fastjson.Value
	commitLSN, changeLSN, eventSerial, lsn *fastjson.Value
	scn, commitSCN                         *fastjson.Value
}

func (s *sourceFields) visit(k []byte, v *fastjson.Value) {
	switch string(k) {
	case "db":
		s.db = v
	case "schema":
		s.schema = v
	case "table":
		s.table = v
	case "ts_ms":
		s.tsMs = v
	case "ts_us":
		s.tsUs = v
	case "txId":
		s.txID = v
	case "xid":
		s.xid = v
	case "gtid":
		s.gtid = v
	case "file":
		s.file = v
	case "pos":
		s.pos = v
	case "row":
		s.row = v
	case "commit_lsn":
		s.commitLSN = v
	case "change_lsn":
		s.changeLSN = v
	case "event_serial_no":
		s.eventSerial = v
	case "lsn":
		s.lsn = v
	case "scn":
		s.scn = v
	case "commit_scn":
		s.commitSCN = v
	}
}

// readSource fills c's Table, time, position and transaction id from the
// source block d.env.source, which must be an object.
func (d *Decoder) readSource(c *change.Change) error {
	o, _ := d.env.source.Object()
	d.src = sourceFields{}
	s := &d.src
	o.Visit(s.visit)

	// Table: db.schema.table, empty parts left out.
	b := d.buf[:0]
	for _, p := range [...]*fastjson.Value{s.db, s.schema, s.table} {
		t, ok := stringBytes(p)
		if !ok || len(t) == 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, t...)
	}
	if len(b) > 0 && len(stringOr(s.table)) > 0 {
		c.Table = d.tables.Get(b)
	}

	ts, ok, err := micros(s.tsUs, s.tsMs)
	if err != nil {
		return decode.Malformed("debezium: source %s", err)
	}
	if ok && ts != 0 {
		c.TSMicros, c.HasTS = ts, true
	}

	for _, x := range [...]*fastjson.Value{s.txID, s.xid, s.gtid} {
		if isNull(x) {
			continue
		}
		b = scalarText(b[:0], x)
		if len(b) > 0 {
			c.Xid = d.xid.Get(b, &d.slab)
			break
		}
	}

	b = b[:0]
	switch {
	case s.file != nil:
		b = scalarText(b, s.file)
		b = append(b, ':')
		b = scalarText(b, s.pos)
		b = append(b, ':')
		b = scalarText(b, s.row)
	case s.commitLSN != nil || s.changeLSN != nil:
		b = scalarText(b, s.commitLSN)
		b = append(b, ':')
		b = scalarText(b, s.changeLSN)
		b = append(b, ':')
		b = scalarText(b, s.eventSerial)
	case s.scn != nil:
		if !isNull(s.commitSCN) {
			b = scalarText(b, s.commitSCN)
			b = append(b, ':')
		}
		b = scalarText(b, s.scn)
	case s.lsn != nil:
		b = scalarText(b, s.lsn)
	}
	c.Pos = d.pos.Get(b, &d.slab)
	d.buf = b
	return nil
}

func isNull(v *fastjson.Value) bool { return v == nil || v.Type() == fastjson.TypeNull }

// stringBytes returns v's text when v is a JSON string.
func stringBytes(v *fastjson.Value) ([]byte, bool) {
	if v == nil || v.Type() != fastjson.TypeString {
		return nil, false
	}
	b, _ := v.StringBytes()
	return b, true
}

func stringOr(v *fastjson.Value) []byte {
	b, _ := stringBytes(v)
	return b
}

// scalarText appends a string's text or any other value's JSON literal;
// nothing for null or absent.
func scalarText(dst []byte, v *fastjson.Value) []byte {
	if v == nil {
		return dst
	}
	switch v.Type() {
	case fastjson.TypeNull:
		return dst
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return append(dst, b...)
	}
	return v.MarshalTo(dst)
}

var (
	errNotInteger = errors.New("is not an integer")
	errRange      = errors.New("is out of range")
)

type tsError struct {
	field string
	err   error
}

func (e *tsError) Error() string { return e.field + " " + e.err.Error() }

// micros returns a time in microseconds from a microsecond field, else a
// millisecond field. ok is false when both are absent or null.
func micros(us, ms *fastjson.Value) (ts int64, ok bool, err error) {
	if !isNull(us) {
		n, err := integer(us)
		if err != nil {
			return 0, false, &tsError{"ts_us", err}
		}
		return n, true, nil
	}
	if !isNull(ms) {
		n, err := integer(ms)
		if err != nil {
			return 0, false, &tsError{"ts_ms", err}
		}
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return 0, false, &tsError{"ts_ms", errRange}
		}
		return n * 1000, true, nil
	}
	return 0, false, nil
}

// integer reads a JSON integer, also when written as a string.
func integer(v *fastjson.Value) (int64, error) {
	switch v.Type() {
	case fastjson.TypeNumber:
		n, err := v.Int64()
		if err != nil {
			return 0, errNotInteger
		}
		return n, nil
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return parseInt(b)
	}
	return 0, errNotInteger
}

func parseInt(b []byte) (int64, error) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, errNotInteger
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errNotInteger
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, errRange
		}
		return -int64(n), nil
	}
	if n > math.MaxInt64 {
		return 0, errRange
	}
	return int64(n), nil
}
