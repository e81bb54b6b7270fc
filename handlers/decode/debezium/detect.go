package debezium

import "github.com/valyala/fastjson"

// detector notes which Debezium fields a payload has.
type detector struct {
	n                                  int
	op                                 []byte
	source, image                      bool
	status, id, databaseName, ddlOrTbl bool
	tsMs                               bool
}

func (t *detector) visit(k []byte, v *fastjson.Value) {
	t.n++
	switch string(k) {
	case "op":
		t.op, _ = stringBytes(v)
	case "source":
		t.source = v.Type() == fastjson.TypeObject
	case "before", "after":
		t.image = true
	case "status":
		b, _ := stringBytes(v)
		t.status = string(b) == "BEGIN" || string(b) == "END"
	case "id":
		t.id = true
	case "databaseName":
		t.databaseName = v.Type() == fastjson.TypeString
	case "ddl", "tableChanges":
		t.ddlOrTbl = true
	case "ts_ms":
		t.tsMs = v.Type() == fastjson.TypeNumber || v.Type() == fastjson.TypeString
	}
}

// Detect tells cheaply, without allocating, whether the unwrapped payload
// v looks like a Debezium event. hasSchema says whether the message came in
// a Kafka Connect schema+payload envelope. It looks for:
//
//   - op c, u, d, r, t or m with a source object; with a Connect schema, a
//     before or after field is enough instead of source;
//   - status BEGIN or END with an id (transaction boundary);
//   - databaseName with ddl or tableChanges (schema change);
//   - ts_ms as the only field (heartbeat).
//
// Detect says nothing about whether Decode will accept the payload.
func Detect(v *fastjson.Value, hasSchema bool) bool {
	if v == nil || v.Type() != fastjson.TypeObject {
		return false
	}
	o, _ := v.Object()
	var t detector
	o.Visit(t.visit)
	switch {
	case len(t.op) == 1:
		switch t.op[0] {
		case 'c', 'u', 'd', 'r', 't', 'm':
			return t.source || (hasSchema && t.image)
		}
		return false
	case t.status && t.id:
		return true
	case t.databaseName && t.ddlOrTbl:
		return true
	case t.tsMs && t.n == 1:
		return true
	}
	return false
}
