-- cdclake real-services workload, part 2: the changes Debezium streams.
-- Run after infra/workload-setup.sql once the connectors stream
-- (infra/workload.sh run). psql variable batch_rows sets the size of the
-- large batch (default 20000; the committed capture uses 200).
\set ON_ERROR_STOP on
SET client_min_messages = warning;
\if :{?batch_rows}
\else
  \set batch_rows 20000
\endif

-- Inserts --------------------------------------------------------------------
INSERT INTO all_types VALUES
  (4, 7, 42, 0, 0, 0, 0, -0.0, -0.0, repeat('x', 0), 'zero', true, '0001-01-01',
   '0001-01-01 00:00:00', '2262-04-11 23:47:16.854', '2038-01-19 03:14:08+00',
   '12:34:56.000001', '00:00:00.000001', 'null', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '\x00', 'ok',
   '{-2147483648,2147483647}', '{"é","😀"}'),
  (5, 5, 5, 5.5, 5.5, 5.5, 1e20, 1.17549435e-38, 5e-324,
   (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 150) g), 'long text row', false, '9999-12-31',
   '9999-12-31 23:59:59.999999', '2000-01-01 00:00:00.001', '9999-12-31 23:59:59.999999+00',
   '00:00:00.5', '-1000 years -1 second', '{"nested": {"deep": [1, 2.50, -3e2]}, "s": "é\\u00e9"}',
   '123e4567-e89b-12d3-a456-426614174000', decode(repeat('ab', 1000), 'hex'), 'happy', '{7}', '{"only"}');

INSERT INTO edge_values VALUES
  (1, 'double NaN and infinities', 'NaN', 'Infinity', 1.0, '00:00:00', '2024-01-01 00:00:00', '2024-01-01 00:00:00+00', '2024-01-01', 'ok', '\x', '{}'),
  (2, 'negative infinity', '-Infinity', '-Infinity', 2.0, '01:00:00', NULL, NULL, NULL, NULL, NULL, NULL),
  (3, 'time 24:00:00', 1.0, 1.0, 3.0, '24:00:00', NULL, NULL, NULL, NULL, NULL, NULL),
  (4, 'numeric NaN', 1.0, 1.0, 'NaN', NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (5, 'timestamp infinity', 1.0, 1.0, 5.0, NULL, 'infinity', '-infinity', 'infinity', NULL, NULL, NULL),
  (6, 'text equal to the placeholder', 1.0, 1.0, 6.0, NULL, NULL, NULL, NULL, '__debezium_unavailable_value', NULL, NULL),
  (7, 'subnormal and extremes', 4.9e-324, 1.4e-45, 0.0000000000000000000000000000000000000000001, '23:59:59.999999',
   '4713-01-01 00:00:00 BC', '294276-12-31 23:59:59.999999+00', '4713-01-01 BC', '', '\x00', '"just a string"'),
  (8, 'numeric with 1000 digits', 1.0, 1.0, (repeat('9', 500) || '.' || repeat('1', 500))::numeric, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (9, 'timestamptz after year 9999', 1.0, 1.0, 9.0, NULL, '12345-06-07 08:09:10.123456', '12345-06-07 08:09:10.123456+00', '12345-06-07', NULL, NULL, NULL);

-- Updates --------------------------------------------------------------------
UPDATE all_types SET c_bigint = c_bigint + 1, c_numeric = 1.0001, c_tstz = '2025-06-30 12:00:00+02' WHERE id = 1;
UPDATE all_types SET c_mood = 'ok', c_int_array = '{9,8,7}', c_jsonb = '{"updated": true}' WHERE id = 2;
-- NULL to values and back
UPDATE all_types SET c_text = 'was null', c_bool = true, c_date = '2020-02-02' WHERE id = 3;
UPDATE all_types SET c_text = NULL WHERE id = 3;
-- The large out-of-line c_text is unchanged (REPLICA IDENTITY FULL).
UPDATE all_types SET c_varchar = 'long text row, updated' WHERE id = 5;
-- An update that changes nothing.
UPDATE all_types SET c_smallint = c_smallint WHERE id = 4;

-- Unchanged TOAST values on a REPLICA IDENTITY DEFAULT table: notes, photo,
-- tags and profile are not in the WAL for these updates.
UPDATE customers SET balance = balance + 1.01 WHERE id IN (1, 2);
UPDATE customers SET mood = 'happy', notes = 'short notes now' WHERE id = 3;

-- Deletes --------------------------------------------------------------------
DELETE FROM all_types WHERE id = 2;   -- FULL: the before image is the whole row
DELETE FROM order_lines WHERE order_id = 100 AND line_no = 1;

-- A primary-key update (Debezium: a delete, a tombstone, then a create), with
-- the order's foreign key following it (ON UPDATE CASCADE).
UPDATE customers SET id = 40 WHERE id = 4;

-- A multi-table transaction ----------------------------------------------------
BEGIN;
INSERT INTO customers (id, email, full_name, mood, balance, signed_up)
VALUES (5, 'c5@example.com', 'Customer Five', 'ok', 0, '2024-05-05 05:05:05.050505+00');
INSERT INTO orders VALUES (102, 5, '2024-05-05 05:06:00', 'new', 30.00, 'ZZ');
INSERT INTO order_lines VALUES (102, 1, 'SKU-9', 2, 7.500), (102, 2, 'SKU-8', 1, 15.000);
UPDATE customers SET balance = balance - 30.00 WHERE id = 5;
UPDATE orders SET status = 'paid' WHERE id = 101;
COMMIT;

-- Schema changes mid-stream ------------------------------------------------------
-- (No DEFAULT: rows that existed before would get it without a change event,
-- so no change stream could rebuild it.)
ALTER TABLE customers ADD COLUMN loyalty_tier text;
ALTER TABLE customers ADD COLUMN score numeric(5, 2);
UPDATE customers SET loyalty_tier = 'gold', score = 99.5 WHERE id = 1;
INSERT INTO customers (id, email, signed_up, loyalty_tier, score)
VALUES (6, 'c6@example.com', '2024-06-06 06:06:06+00', 'silver', -1.25);
UPDATE customers SET full_name = 'Customer Two' WHERE id = 2;
ALTER TABLE orders DROP COLUMN legacy_code;
UPDATE orders SET status = 'shipped' WHERE id = 100;

-- A logical decoding message (Debezium op "m", not a row change).
SELECT pg_logical_emit_message(true, 'cdclake', 'mid-stream message') IS NOT NULL AS message_sent;

-- A table created mid-stream, then TRUNCATE ----------------------------------------
CREATE TABLE audit_log (
  id      integer PRIMARY KEY,
  action  text NOT NULL,
  at      timestamp NOT NULL DEFAULT '2024-07-07 07:07:07'
);
INSERT INTO audit_log (id, action) SELECT g, 'before truncate ' || g FROM generate_series(1, 5) g;
UPDATE audit_log SET action = 'updated before truncate' WHERE id = 2;
TRUNCATE audit_log;
INSERT INTO audit_log (id, action) VALUES (2, 'after truncate'), (10, 'after truncate too');

-- The large batch ---------------------------------------------------------------------
INSERT INTO events
SELECT g, (ARRAY['click', 'view', 'buy'])[1 + g % 3], round((g % 1000) * 1.37, 2),
       timestamptz '2024-02-01 00:00:00+00' + g * interval '1.000001 second',
       jsonb_build_object('seq', g, 'tag', md5(g::text))
FROM generate_series(11, 10 + :batch_rows) g;
UPDATE events SET kind = 'refund', amount = -amount WHERE id % 10 = 0;
DELETE FROM events WHERE id % 7 = 0;

-- The end marker: infra/capture waits for it before reading the topics.
SELECT pg_logical_emit_message(true, 'cdclake', 'workload-end') IS NOT NULL AS end_marker_sent;
