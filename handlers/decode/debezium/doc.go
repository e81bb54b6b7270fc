// Package debezium decodes Debezium change events (MySQL, MariaDB,
// PostgreSQL, SQL Server, Oracle and the other relational connectors) into
// typed changes, maps the Kafka Connect schema of a row to columns
// (Columns), and tells Debezium-shaped payloads apart from other formats
// (Detect).
//
// The Decoder implements decode.Decoder, decode.Detector and
// decode.SchemaColumns. It is called once per message from
// one goroutine and keeps reusable buffers, so one decoder must not be
// shared between goroutines. A decoded Change points into the caller's
// parse arena (images, Raw); see package change for its lifetime. In steady
// state Decode does not allocate: table names are interned, and positions
// and transaction ids are copied into large shared blocks (ordinary
// immutable strings, safe to keep).
//
// # Input
//
// Decode receives the Debezium payload after the unwrap stage removed the
// Kafka Connect JSON envelope. With schemas.enable=true the unwrap stage put
// the envelope's schema (the Envelope struct schema) in Change.Schema and
// its bytes in Change.SchemaKey; with schemas.enable=false Change.Schema is
// nil. Tombstones never reach the decoder.
//
// # Classes
//
// A payload is classified by its fields, in this order:
//
//   - op c, u, d, r or t: a data change (KindDML) with Op Insert, Update,
//     Delete, Read or Truncate. c, u and r need an after image; d must not
//     carry one; t carries no image at all. An incremental snapshot read
//     (source.snapshot "incremental") is an ordinary Read.
//   - op m: a logical decoding message (KindMessage), Raw = payload.
//   - any other op: malformed.
//   - status BEGIN or END with an id: a transaction boundary
//     (KindTransaction), Xid = id, TS from ts_ms, Raw = payload.
//   - databaseName with ddl or tableChanges: a schema change
//     (KindSchemaChange), Raw = payload, Statement = ddl, Table from
//     tableChanges[0].id (see below) or else databaseName, TS and Pos from
//     the source block.
//     SQL Server sends ddl null; that is fine.
//   - ts_ms as the only field, or an Envelope schema whose name ends with
//     Heartbeat (io.debezium.connector.common.Heartbeat): a heartbeat
//     (KindHeartbeat), TS from ts_ms, Raw = payload.
//
// Anything else, a payload that is not an object, a data change without a
// source block or table, images that are neither objects nor null (the
// MongoDB connector's JSON-text images are not supported), a recognised
// top-level field given twice or times that are not integers are
// malformed (decode.ErrMalformed).
//
// For a data change the decoder fills:
//
//   - Before, After: the images; null or absent means no image.
//   - TSMicros: the time of the change in the database, source.ts_us, else
//     source.ts_ms × 1000. Zero means the connector did not know the time
//     (MySQL snapshot reads) and leaves HasTS false.
//   - Xid: the source's txId or xid (PostgreSQL, Oracle: the same for every
//     event of a transaction), else transaction.id (PostgreSQL's is
//     txId:lsn, different per event), else the source gtid (what Debezium
//     uses as the MySQL transaction id).
//   - Pos: see Positions.
//   - Extras, in this order: _debezium_source (the whole source block, JSON),
//     _debezium_ts (the envelope's ts_us, else ts_ms × 1000: when Debezium
//     processed the event; left out when absent) and _debezium_transaction
//     (the transaction block, JSON; left out when null).
//   - Schema: when set, replaced by the row schema, the schema of the
//     Envelope's after field (else its before field), so that Columns can
//     map it. SchemaKey is kept: it still identifies the Envelope schema,
//     which determines the row schema. A data change whose Envelope schema
//     has neither field is malformed. For other classes Schema is left as
//     the unwrap stage set it.
//
// Numbers Debezium sometimes writes as strings ("ts_ms": "1580390884335" in
// its documentation) are accepted wherever an integer is expected.
//
// # Table names
//
// A data change's Table is built from the source block, whatever the
// connector: db, schema and table joined with '.', empty or absent parts
// left out. So MySQL and MariaDB give db.table (inventory.customers) and
// PostgreSQL, SQL Server, Oracle and Db2 give db.schema.table
// (postgres.public.customers, testDB.dbo.customers,
// ORCLPDB1.DEBEZIUM.CUSTOMERS). The logical server name (source.name, the
// topic prefix) is not part of the name: two connectors capturing one
// database land in the same tables. Names containing '.' are not quoted.
//
// A schema change's Table is its first tableChanges entry's id with the
// double quotes removed ("testDB"."dbo"."customers" → testDB.dbo.customers,
// doubled quotes inside a part kept as one), which matches the data change
// rule. For a rename, whose id is "<old>,<new>", the new name is used.
// Without tableChanges entries the Table is databaseName.
//
// # Positions
//
// Pos is a textual position built from the source block by the first rule
// whose field is present:
//
//   - file (MySQL, MariaDB): file:pos:row (mysql-bin.000003:484:0).
//   - commit_lsn or change_lsn (SQL Server, Db2, Informix):
//     commit_lsn:change_lsn:event_serial_no, a null part left empty
//     (00000027:00000758:0005:00000027:00000758:0003:1). Commit first, so
//     positions sort in commit order.
//   - scn (Oracle): commit_scn:scn when commit_scn is set, else scn.
//   - lsn (PostgreSQL): lsn (24023128).
//
// A string is used as sent, a number as its literal text. Without any of
// these fields Pos is empty. Events of one row event (a primary key change
// sent as delete + create) share their position.
//
// # Unavailable values (TOAST)
//
// PostgreSQL does not send unchanged TOASTed columns (REPLICA IDENTITY
// DEFAULT), and Oracle does not send unchanged LOB columns; Debezium puts
// its unavailable.value.placeholder (Options.UnavailableValuePlaceholder,
// default __debezium_unavailable_value) in their place. Such a column was
// not sent: the decoder deletes it from the image object, so later stages
// see it as absent, not as a value. A top-level column is taken as
// unavailable when its value is, depending on its type:
//
//   - the placeholder string (text, JSON, XML, enum columns; bytes columns
//     with binary.handling.mode base64 or hex);
//   - the base64 of the placeholder bytes (bytes columns, the default
//     binary.handling.mode; Oracle BLOB);
//   - a one-element array of either of these (text[], json[], bytea[]), or
//     of the name-based (version 3) UUID of the placeholder bytes (uuid[]);
//   - an array of the placeholder's bytes as numbers (int[], bigint[],
//     date[]);
//   - the hstore {placeholder: placeholder}, as an object (hstore map mode)
//     or as its JSON text (json mode).
//
// These forms are recognised whatever the column's declared type (the
// decoder does not look at the schema); a real value equal to one of them
// would be dropped too. Nested values are not inspected. A placeholder
// given as hex:<octets>, as Debezium allows, is decoded first.
// Options.KeepUnavailable turns the scan off.
package debezium
