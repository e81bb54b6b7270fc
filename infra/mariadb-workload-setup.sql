-- MariaDB workload, part 1: schema and the rows of the initial snapshot
-- (Debezium op "r"). infra/workload.sh runs it before the connector starts.
-- The server runs in UTC with sql_mode '' (zero dates allowed).

CREATE TABLE all_types (
  id            INT PRIMARY KEY,
  c_tinyint     TINYINT,
  c_bool        BOOLEAN,
  c_smallint    SMALLINT,
  c_mediumint   MEDIUMINT,
  c_int_u       INT UNSIGNED,
  c_bigint      BIGINT,
  c_bigint_u    BIGINT UNSIGNED,
  c_decimal     DECIMAL(12, 4),
  c_decimal_65  DECIMAL(65, 30),
  c_float       FLOAT,
  c_double      DOUBLE,
  c_date        DATE,
  c_datetime    DATETIME(6),
  c_datetime0   DATETIME,
  c_timestamp   TIMESTAMP(6) NULL DEFAULT NULL,
  c_time        TIME(6),
  c_year        YEAR,
  c_bit1        BIT(1),
  c_bit12       BIT(12),
  c_bit64       BIT(64),
  c_enum        ENUM('small', 'medium', 'large'),
  c_set         SET('red', 'green', 'blue'),
  c_json        JSON,
  c_blob        BLOB,
  c_binary      BINARY(4),
  c_char        CHAR(4),
  c_varchar     VARCHAR(40),
  c_text        TEXT
) CHARACTER SET utf8mb4;

-- A primary-key update and plain updates.
CREATE TABLE accounts (
  id        BIGINT UNSIGNED PRIMARY KEY,
  email     VARCHAR(120) NOT NULL,
  balance   DECIMAL(12, 2) NOT NULL DEFAULT 0,
  opened    DATE NOT NULL,
  updated   TIMESTAMP(6) NOT NULL DEFAULT '2024-01-01 00:00:00'
) CHARACTER SET utf8mb4;

-- A multi-table transaction; ALTER TABLE mid-stream.
CREATE TABLE orders (
  id          BIGINT PRIMARY KEY,
  account_id  BIGINT UNSIGNED NOT NULL,
  ordered_at  DATETIME(6) NOT NULL,
  total       DECIMAL(14, 2) NOT NULL,
  legacy      CHAR(4)
) CHARACTER SET utf8mb4;

-- A composite primary key.
CREATE TABLE order_lines (
  order_id    BIGINT NOT NULL,
  line_no     SMALLINT NOT NULL,
  sku         VARCHAR(20) NOT NULL,
  qty         INT NOT NULL,
  unit_price  DECIMAL(10, 3) NOT NULL,
  PRIMARY KEY (order_id, line_no)
) CHARACTER SET utf8mb4;

-- The large batch lands here.
CREATE TABLE events (
  id       BIGINT PRIMARY KEY,
  kind     VARCHAR(20) NOT NULL,
  amount   DECIMAL(10, 2),
  at       DATETIME(6) NOT NULL,
  span     TIME(6),
  payload  JSON
) CHARACTER SET utf8mb4;

-- The last change of the workload: infra/capture.sh waits for its row.
CREATE TABLE workload_end (
  id     INT PRIMARY KEY,
  label  VARCHAR(40) NOT NULL
);

INSERT INTO all_types VALUES
  (1, 127, TRUE, 32767, 8388607, 4294967295, 9223372036854775807, 18446744073709551615,
   12345678.1234, 99999999999999999999999999999999999.999999999999999999999999999999,
   0.5, 0.1, '2024-02-29', '2024-02-29 23:59:59.999999', '9999-12-31 23:59:59',
   '2038-01-19 03:14:07.999999', '838:59:59.000000', 2155,
   b'1', b'100000000001', b'1111111111111111111111111111111111111111111111111111111111111111',
   'large', 'red,blue', '{"a": [1, 2.50, "x"], "n": null, "big": 12345678901234567890.123}',
   x'00ff10', x'01020304', 'abcd', 'plain ascii', 'unicode é€😀 𝄞 and a 4-byte emoji'),
  (2, -128, FALSE, -32768, -8388608, 0, -9223372036854775808, 0,
   -0.0001, -0.000000000000000000000000000001,
   -1.25, -1.7976931348623157e308, '1000-01-01', '1000-01-01 00:00:00.000000', '1969-12-31 23:59:59',
   '1970-01-01 00:00:01.000000', '-838:59:59.000000', 1901,
   b'0', b'000000000000', b'0000000000000000000000000000000000000000000000000000000000000000',
   'small', '', '[]',
   '', x'00000000', '', '', CONCAT('tab', CHAR(9), 'here, newline', CHAR(10), 'there, quote " backslash \\ end')),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  -- zero dates: Debezium sends NULL for them (zeroDateTimeBehavior=CONVERT_TO_NULL)
  (4, 0, TRUE, 0, 0, 1, 1, 9223372036854775808, 0, 0,
   3.4e38, 4.9e-324, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00',
   NULL, '100:00:00.5', 2024,
   b'1', b'010000000010', b'1000000000000000000000000000000000000000000000000000000000000001',
   'medium', 'red,green,blue', '{"nested": {"deep": [true, false, null]}}',
   REPEAT(x'deadbeef', 1024), x'ff', 'é', REPEAT('x', 40), REPEAT('long text ', 500));

INSERT INTO accounts (id, email, balance, opened, updated) VALUES
  (1, 'a1@example.com', 10.25, '2023-01-01', '2023-01-01 09:00:00.000001'),
  (2, 'a2@example.com', 20.50, '2023-02-02', '2023-02-02 10:00:00'),
  (3, 'a3@example.com', 0, '2023-03-03', '2023-03-03 11:00:00.5'),
  (18446744073709551615, 'max@example.com', -1.00, '2023-04-04', '2023-04-04 12:00:00');

INSERT INTO orders VALUES
  (100, 1, '2024-01-01 08:00:00.000001', 99.90, 'L001'),
  (101, 2, '2024-01-02 09:30:00', 10.00, NULL);

INSERT INTO order_lines VALUES
  (100, 1, 'SKU-1', 1, 49.950),
  (100, 2, 'SKU-2', 2, 24.975),
  (101, 1, 'SKU-3', 4, 2.500);
