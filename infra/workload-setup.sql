-- cdclake real-services workload, part 1: the schema and the rows that exist
-- before the connectors start (Debezium's initial snapshot reads them: op "r").
-- Run on a fresh database `shop` (infra/workload.sh setup). Part 2 is
-- infra/workload.sql.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');

-- Every column type of interest. REPLICA IDENTITY FULL: updates and deletes
-- carry the whole old row as the before image.
CREATE TABLE all_types (
  id              integer PRIMARY KEY,
  c_smallint      smallint,
  c_bigint        bigint,
  c_numeric       numeric(12, 4),
  c_numeric_38    numeric(38, 10),
  c_numeric_50    numeric(50, 5),
  c_numeric_any   numeric,
  c_real          real,
  c_double        double precision,
  c_text          text,
  c_varchar       varchar(40),
  c_bool          boolean,
  c_date          date,
  c_ts            timestamp,
  c_ts3           timestamp(3),
  c_tstz          timestamptz,
  c_time          time,
  c_interval      interval,
  c_jsonb         jsonb,
  c_uuid          uuid,
  c_bytea         bytea,
  c_mood          mood,
  c_int_array     integer[],
  c_text_array    text[]
);
ALTER TABLE all_types REPLICA IDENTITY FULL;
ALTER TABLE all_types ALTER COLUMN c_text SET STORAGE EXTERNAL;

-- REPLICA IDENTITY DEFAULT: the before image of a delete has the key only;
-- large values stored out of line (TOAST) and left unchanged by an update are
-- not in the WAL, so Debezium sends its unavailable-value placeholder.
CREATE TABLE customers (
  id          bigint PRIMARY KEY,
  email       varchar(120) NOT NULL,
  full_name   text,
  mood        mood,
  balance     numeric(12, 2) NOT NULL DEFAULT 0,
  signed_up   timestamptz NOT NULL,
  notes       text,
  photo       bytea,
  tags        text[],
  profile     jsonb
);
ALTER TABLE customers ALTER COLUMN notes SET STORAGE EXTERNAL;
ALTER TABLE customers ALTER COLUMN photo SET STORAGE EXTERNAL;
ALTER TABLE customers ALTER COLUMN tags SET STORAGE EXTERNAL;
ALTER TABLE customers ALTER COLUMN profile SET STORAGE EXTERNAL;

CREATE TABLE orders (
  id           bigint PRIMARY KEY,
  customer_id  bigint NOT NULL REFERENCES customers (id) ON UPDATE CASCADE,
  ordered_at   timestamp(6) NOT NULL,
  status       text NOT NULL,
  total        numeric(14, 2) NOT NULL,
  legacy_code  char(4)
);

-- A composite primary key.
CREATE TABLE order_lines (
  order_id    bigint NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
  line_no     smallint NOT NULL,
  sku         varchar(20) NOT NULL,
  qty         integer NOT NULL,
  unit_price  numeric(10, 3) NOT NULL,
  PRIMARY KEY (order_id, line_no)
);

-- The large batch lands here; its topics have three partitions.
CREATE TABLE events (
  id          bigint PRIMARY KEY,
  kind        text NOT NULL,
  amount      numeric(10, 2),
  at          timestamptz NOT NULL,
  payload     jsonb
);

-- Values at the edges of each type (kept apart, so that a value cdclake
-- refuses does not hide the others).
CREATE TABLE edge_values (
  id          integer PRIMARY KEY,
  label       text NOT NULL,
  c_double    double precision,
  c_real      real,
  c_numeric_any numeric,
  c_time      time,
  c_ts        timestamp,
  c_tstz      timestamptz,
  c_date      date,
  c_text      text,
  c_bytea     bytea,
  c_jsonb     jsonb
);

-- Snapshot rows ------------------------------------------------------------
INSERT INTO all_types VALUES
  (1, 1, 9007199254740993, 12345678.1234, 1234567890123456789012345678.0123456789,
   123456789012345678901234567890123456789012345.12345, 1.50,
   0.1, 0.1, 'plain ascii', 'varchar', true, '2024-02-29',
   '2024-02-29 23:59:59.999999', '2024-02-29 12:00:00.123', '2024-02-29 23:30:00.000001+00',
   '23:59:59.999999', '1 year 2 mons 3 days 04:05:06.789', '{"a": 1, "b": [true, null, "x"], "n": 12345678901234567890.123}',
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\x00ff10', 'happy', '{1,NULL,3}', '{"a,b","c\"d",NULL,""}'),
  (2, -32768, -9223372036854775808, -0.0001, -0.0000000001, -0.00001, -123456789012345678901234567890.123456789012345,
   3.4028235e38, -1.7976931348623157e308, E'tab\there, newline\nthere, quote " backslash \\ unicode é€😀', '', false, '1970-01-01',
   '1969-12-31 23:59:59.999999', '1900-01-01 00:00:00', '1969-12-31 23:59:59.5-05:30',
   '00:00:00', '-1 days -00:00:00.000001', '[]', '00000000-0000-0000-0000-000000000000', '', 'sad', '{}', '{}'),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

INSERT INTO customers (id, email, full_name, mood, balance, signed_up, notes, photo, tags, profile)
SELECT i, 'c' || i || '@example.com', 'Customer ' || i, (ARRAY['sad','ok','happy'])[1 + i % 3]::mood,
       i * 10.25, timestamptz '2023-01-01 09:00:00+01' + i * interval '1 day 1 hour 1.000001 second',
       -- about 4 KB of incompressible text, stored out of line
       (SELECT string_agg(md5(i::text || '-' || g::text), ' ') FROM generate_series(1, 120) g),
       (SELECT decode(string_agg(md5(i::text || ':' || g::text), ''), 'hex') FROM generate_series(1, 150) g),
       (SELECT array_agg(md5(i::text || '/' || g::text)) FROM generate_series(1, 80) g),
       jsonb_build_object('id', i, 'blob', (SELECT string_agg(md5(i::text || '+' || g::text), '') FROM generate_series(1, 80) g))
FROM generate_series(1, 4) i;

INSERT INTO orders VALUES
  (100, 1, '2024-03-01 10:00:00.000001', 'new', 10.50, 'AB'),
  (101, 2, '2024-03-02 11:00:00.5', 'paid', 99999999.99, NULL);
INSERT INTO order_lines VALUES
  (100, 1, 'SKU-1', 1, 10.500),
  (101, 1, 'SKU-2', 3, 0.001),
  (101, 2, 'SKU-3', 1, 9999999.999);

INSERT INTO events
SELECT g, 'seed', g * 1.5, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 minute', jsonb_build_object('seq', g)
FROM generate_series(1, 10) g;
