package goldengate

import (
	"errors"
	"fmt"
	"strings"
)

// Options configures a DataStreams decoder: the field names and operation
// strings the stream was configured with (Data Streams metaFields,
// beforeImageName, afterImageName). Empty fields take the defaults shown;
// names are matched exactly and literally (a dot is part of the name, not a
// path).
type Options struct {
	// QualifiedTable names the qualified table field (metaFields.qualifiedTable),
	// default "qual_table".
	QualifiedTable string
	// OpType names the operation field, default "op_type".
	OpType string
	// OpTimestamp names the operation time field, default "op_ts".
	OpTimestamp string
	// TransactionID names the transaction identifier field, default "xid".
	TransactionID string
	// Position names the recovery position field, default "pos".
	Position string
	// CSN names the commit sequence number field, default "csn".
	CSN string
	// Tokens names the tokens field, default "tokens".
	Tokens string
	// BeforeImage names the before image (beforeImageName), default "before".
	BeforeImage string
	// AfterImage names the after image (afterImageName), default "after".
	AfterImage string

	// InsertOp, UpdateOp, DeleteOp and UpsertOp are the op_type values of
	// DML records, default INSERT, UPDATE, DELETE and UPSERT.
	InsertOp string
	UpdateOp string
	DeleteOp string
	UpsertOp string
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
	all := o.keys()
	fields, ops := all[:9], all[9:]
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
	Table string
	// OpType names the operation field, default "op_type".
	OpType string
	// OpTimestamp names the operation time field, default "op_ts".
	OpTimestamp string
	// CurrentTimestamp names the formatting time field, default "current_ts".
	CurrentTimestamp string
	// Position names the position field, default "pos".
	Position string
	// TransactionID names the transaction identifier field some formatter
	// configurations add (metaColumnsTemplate), default "xid".
	TransactionID string
	// CSN names the commit sequence number field some configurations add,
	// default "csn".
	CSN string
	// PrimaryKeys names the primary key list field, default "primary_keys".
	PrimaryKeys string
	// Tokens names the tokens field, default "tokens".
	Tokens string
	// BeforeImage names the before image, default "before".
	BeforeImage string
	// AfterImage names the after image, default "after".
	AfterImage string

	// InsertOp, UpdateOp, DeleteOp and TruncateOp are the formatter's
	// operation keys, default I, U, D and T. The long forms INSERT, UPDATE,
	// DELETE and TRUNCATE are always accepted too; a configured key wins
	// over a long form it equals.
	InsertOp   string
	UpdateOp   string
	DeleteOp   string
	TruncateOp string
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
	all := o.keys()
	fields, ops := all[:11], all[11:]
	var errs []error
	errs = checkDistinct(errs, "field", fields, nil, "")
	errs = checkDistinct(errs, "operation", ops, nil, "")
	return errors.Join(errs...)
}

// keys lists the options by their configuration key: the fields first,
// then the operation strings.
func (o *Options) keys() []option {
	return []option{
		{"qualifiedTable", &o.QualifiedTable}, {"opType", &o.OpType}, {"opTimestamp", &o.OpTimestamp},
		{"transactionId", &o.TransactionID}, {"position", &o.Position}, {"csn", &o.CSN}, {"tokens", &o.Tokens},
		{"beforeImageName", &o.BeforeImage}, {"afterImageName", &o.AfterImage},
		{"insertOp", &o.InsertOp}, {"updateOp", &o.UpdateOp}, {"deleteOp", &o.DeleteOp}, {"upsertOp", &o.UpsertOp},
	}
}

// Set sets the option whose configuration key is key (the Data Streams
// property name: qualifiedTable, opType, …, upsertOp).
func (o *Options) Set(key, value string) error { return set(o.keys(), key, value) }

// keys lists the options by their configuration key: the fields first,
// then the operation keys.
func (o *BigDataOptions) keys() []option {
	return []option{
		{"table", &o.Table}, {"opType", &o.OpType}, {"opTimestamp", &o.OpTimestamp},
		{"currentTimestamp", &o.CurrentTimestamp}, {"position", &o.Position}, {"transactionId", &o.TransactionID},
		{"csn", &o.CSN}, {"primaryKeys", &o.PrimaryKeys},
		{"tokens", &o.Tokens}, {"beforeObjectName", &o.BeforeImage}, {"afterObjectName", &o.AfterImage},
		{"insertOpKey", &o.InsertOp}, {"updateOpKey", &o.UpdateOp}, {"deleteOpKey", &o.DeleteOp}, {"truncateOpKey", &o.TruncateOp},
	}
}

// Set sets the option whose configuration key is key (the JSON formatter
// property name: table, opType, …, truncateOpKey).
func (o *BigDataOptions) Set(key, value string) error { return set(o.keys(), key, value) }

type option struct {
	key string
	val *string
}

func set(opts []option, key, value string) error {
	names := make([]string, len(opts))
	for i, o := range opts {
		if o.key == key {
			*o.val = value
			return nil
		}
		names[i] = o.key
	}
	return fmt.Errorf("unknown key %q (known: %s)", key, strings.Join(names, ", "))
}

func setDefault(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

// checkDistinct appends an error for each empty value, each value given by
// two keys, and each value in reserved.
func checkDistinct(errs []error, what string, opts []option, reserved []string, why string) []error {
	for i, o := range opts {
		if *o.val == "" {
			errs = append(errs, fmt.Errorf("goldengate: %s: is empty", o.key))
			continue
		}
		for _, r := range reserved {
			if *o.val == r {
				errs = append(errs, fmt.Errorf("goldengate: %s: %q %s", o.key, *o.val, why))
			}
		}
		for _, p := range opts[:i] {
			if *p.val == *o.val {
				errs = append(errs, fmt.Errorf("goldengate: %s and %s: both name %s %q", p.key, o.key, what, *o.val))
			}
		}
	}
	return errs
}
