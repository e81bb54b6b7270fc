package goldengate

import (
	"errors"
	"fmt"
)

// Options configures a DataStreams decoder: the field names and operation
// strings the stream was configured with (Data Streams metaFields,
// beforeImageName, afterImageName). Empty fields take the defaults shown;
// names are matched exactly and literally (a dot is part of the name, not a
// path).
type Options struct {
	// QualifiedTable names the qualified table field (metaFields.qualifiedTable),
	// default "qual_table".
	QualifiedTable string `json:"qualifiedTable" yaml:"qualifiedTable"`
	// OpType names the operation field, default "op_type".
	OpType string `json:"opType" yaml:"opType"`
	// OpTimestamp names the operation time field, default "op_ts".
	OpTimestamp string `json:"opTimestamp" yaml:"opTimestamp"`
	// TransactionID names the transaction identifier field, default "xid".
	TransactionID string `json:"transactionId" yaml:"transactionId"`
	// Position names the recovery position field, default "pos".
	Position string `json:"position" yaml:"position"`
	// CSN names the commit sequence number field, default "csn".
	CSN string `json:"csn" yaml:"csn"`
	// Tokens names the tokens field, default "tokens".
	Tokens string `json:"tokens" yaml:"tokens"`
	// BeforeImage names the before image (beforeImageName), default "before".
	BeforeImage string `json:"beforeImageName" yaml:"beforeImageName"`
	// AfterImage names the after image (afterImageName), default "after".
	AfterImage string `json:"afterImageName" yaml:"afterImageName"`

	// InsertOp, UpdateOp, DeleteOp and UpsertOp are the op_type values of
	// DML records, default INSERT, UPDATE, DELETE and UPSERT.
	InsertOp string `json:"insertOp" yaml:"insertOp"`
	UpdateOp string `json:"updateOp" yaml:"updateOp"`
	DeleteOp string `json:"deleteOp" yaml:"deleteOp"`
	UpsertOp string `json:"upsertOp" yaml:"upsertOp"`
}

// SetDefaults fills empty fields with the Data Streams defaults.
func (o *Options) SetDefaults() {
	setDefault(&o.QualifiedTable, "qual_table")
	setDefault(&o.OpType, "op_type")
	setDefault(&o.OpTimestamp, "op_ts")
	setDefault(&o.TransactionID, "xid")
	setDefault(&o.Position, "pos")
	setDefault(&o.CSN, "csn")
	setDefault(&o.Tokens, "tokens")
	setDefault(&o.BeforeImage, "before")
	setDefault(&o.AfterImage, "after")
	setDefault(&o.InsertOp, "INSERT")
	setDefault(&o.UpdateOp, "UPDATE")
	setDefault(&o.DeleteOp, "DELETE")
	setDefault(&o.UpsertOp, "UPSERT")
}

// Validate reports every problem with o, each naming its key: an empty
// name, two keys naming the same field or operation, an operation string
// reserved for non-DML records, or a field the decoder reads itself (ddl).
// Call it after SetDefaults.
func (o Options) Validate() error {
	fields := []option{
		{"qualifiedTable", o.QualifiedTable}, {"opType", o.OpType}, {"opTimestamp", o.OpTimestamp},
		{"transactionId", o.TransactionID}, {"position", o.Position}, {"csn", o.CSN}, {"tokens", o.Tokens},
		{"beforeImageName", o.BeforeImage}, {"afterImageName", o.AfterImage},
	}
	ops := []option{{"insertOp", o.InsertOp}, {"updateOp", o.UpdateOp}, {"deleteOp", o.DeleteOp}, {"upsertOp", o.UpsertOp}}
	var errs []error
	errs = checkDistinct(errs, "field", fields, []string{"ddl"}, "is read from DDL records")
	errs = checkDistinct(errs, "operation", ops, []string{opDDL, opStreamMetadata, opObjectMetadata}, "is reserved for non-DML records")
	return errors.Join(errs...)
}

// BigDataOptions configures a BigData decoder: the field names and operation
// keys the JSON formatter was configured with. Empty fields take the
// defaults shown; names are matched exactly.
type BigDataOptions struct {
	// Table names the qualified table field, default "table".
	Table string `json:"table" yaml:"table"`
	// OpType names the operation field, default "op_type".
	OpType string `json:"opType" yaml:"opType"`
	// OpTimestamp names the operation time field, default "op_ts".
	OpTimestamp string `json:"opTimestamp" yaml:"opTimestamp"`
	// CurrentTimestamp names the formatting time field, default "current_ts".
	CurrentTimestamp string `json:"currentTimestamp" yaml:"currentTimestamp"`
	// Position names the position field, default "pos".
	Position string `json:"position" yaml:"position"`
	// TransactionID names the transaction identifier field some formatter
	// configurations add (metaColumnsTemplate), default "xid".
	TransactionID string `json:"transactionId" yaml:"transactionId"`
	// CSN names the commit sequence number field some configurations add,
	// default "csn".
	CSN string `json:"csn" yaml:"csn"`
	// PrimaryKeys names the primary key list field, default "primary_keys".
	PrimaryKeys string `json:"primaryKeys" yaml:"primaryKeys"`
	// Tokens names the tokens field, default "tokens".
	Tokens string `json:"tokens" yaml:"tokens"`
	// BeforeImage names the before image, default "before".
	BeforeImage string `json:"beforeObjectName" yaml:"beforeObjectName"`
	// AfterImage names the after image, default "after".
	AfterImage string `json:"afterObjectName" yaml:"afterObjectName"`

	// InsertOp, UpdateOp, DeleteOp and TruncateOp are the formatter's
	// operation keys, default I, U, D and T. The long forms INSERT, UPDATE,
	// DELETE and TRUNCATE are always accepted too; a configured key wins
	// over a long form it equals.
	InsertOp   string `json:"insertOpKey" yaml:"insertOpKey"`
	UpdateOp   string `json:"updateOpKey" yaml:"updateOpKey"`
	DeleteOp   string `json:"deleteOpKey" yaml:"deleteOpKey"`
	TruncateOp string `json:"truncateOpKey" yaml:"truncateOpKey"`
}

// SetDefaults fills empty fields with the JSON formatter defaults.
func (o *BigDataOptions) SetDefaults() {
	setDefault(&o.Table, "table")
	setDefault(&o.OpType, "op_type")
	setDefault(&o.OpTimestamp, "op_ts")
	setDefault(&o.CurrentTimestamp, "current_ts")
	setDefault(&o.Position, "pos")
	setDefault(&o.TransactionID, "xid")
	setDefault(&o.CSN, "csn")
	setDefault(&o.PrimaryKeys, "primary_keys")
	setDefault(&o.Tokens, "tokens")
	setDefault(&o.BeforeImage, "before")
	setDefault(&o.AfterImage, "after")
	setDefault(&o.InsertOp, "I")
	setDefault(&o.UpdateOp, "U")
	setDefault(&o.DeleteOp, "D")
	setDefault(&o.TruncateOp, "T")
}

// Validate reports every problem with o, each naming its key: an empty
// name, or two keys naming the same field or operation. Call it after
// SetDefaults.
func (o BigDataOptions) Validate() error {
	fields := []option{
		{"table", o.Table}, {"opType", o.OpType}, {"opTimestamp", o.OpTimestamp},
		{"currentTimestamp", o.CurrentTimestamp}, {"position", o.Position}, {"transactionId", o.TransactionID},
		{"csn", o.CSN}, {"primaryKeys", o.PrimaryKeys},
		{"tokens", o.Tokens}, {"beforeObjectName", o.BeforeImage}, {"afterObjectName", o.AfterImage},
	}
	ops := []option{{"insertOpKey", o.InsertOp}, {"updateOpKey", o.UpdateOp}, {"deleteOpKey", o.DeleteOp}, {"truncateOpKey", o.TruncateOp}}
	var errs []error
	errs = checkDistinct(errs, "field", fields, nil, "")
	errs = checkDistinct(errs, "operation", ops, nil, "")
	return errors.Join(errs...)
}

type option struct{ key, val string }

func setDefault(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

// checkDistinct appends an error for each empty value, each value given by
// two keys, and each value in reserved.
func checkDistinct(errs []error, what string, opts []option, reserved []string, why string) []error {
	for i, o := range opts {
		if o.val == "" {
			errs = append(errs, fmt.Errorf("goldengate: %s: is empty", o.key))
			continue
		}
		for _, r := range reserved {
			if o.val == r {
				errs = append(errs, fmt.Errorf("goldengate: %s: %q %s", o.key, o.val, why))
			}
		}
		for _, p := range opts[:i] {
			if p.val == o.val {
				errs = append(errs, fmt.Errorf("goldengate: %s and %s: both name %s %q", p.key, o.key, what, o.val))
			}
		}
	}
	return errs
}
