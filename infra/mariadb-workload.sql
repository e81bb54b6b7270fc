-- MariaDB workload, part 2: the streamed changes (binlog). infra/workload.sh
-- runs it once the connector streams; @batch_rows is the large batch's size.

-- Values again, now from the binlog instead of the snapshot.
INSERT INTO all_types VALUES
  (10, 1, TRUE, 1, 1, 1, 1, 18446744073709551615,
   -12345678.1234, -99999999999999999999999999999999999.999999999999999999999999999999,
   -0.5, 2.5, '2024-06-30', '2024-06-30 12:00:00.123456', '2024-06-30 12:00:00',
   '2024-06-30 12:00:00.654321', '-00:00:01.000001', 2024,
   b'1', b'111111111111', b'0000000000000000000000000000000000000000000000000000000100000000',
   'medium', 'green', '{"streamed": true}',
   x'0102', x'0a0b0c0d', 'wxyz', 'streamed', 'emoji 🐘 and 𝄞'),
  (11, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   '0000-00-00', '0000-00-00 00:00:00', NULL, NULL, '-100:00:00.5', NULL,
   NULL, NULL, NULL, NULL, '', NULL, NULL, NULL, NULL, NULL, NULL);

-- Updates: values to NULL and back, a no-op, each type changed.
UPDATE all_types SET c_bigint_u = c_bigint_u - 1, c_decimal = 1.0001, c_timestamp = '2025-06-30 10:00:00.000001' WHERE id = 1;
UPDATE all_types SET c_enum = 'large', c_set = 'green,blue', c_json = '{"updated": true}', c_time = '23:59:59.999999' WHERE id = 2;
UPDATE all_types SET c_text = 'was null', c_year = 1999, c_bit12 = b'101010101010' WHERE id = 3;
UPDATE all_types SET c_text = NULL WHERE id = 3;
UPDATE all_types SET c_smallint = c_smallint WHERE id = 4;

-- A primary-key update: Debezium sends a delete (and tombstone) for the old
-- key and a create for the new one.
UPDATE accounts SET id = 1001 WHERE id = 1;
UPDATE accounts SET balance = balance + 1.01, updated = '2024-05-05 05:05:05.050505' WHERE id IN (2, 3);
DELETE FROM accounts WHERE id = 18446744073709551615;

-- A multi-table transaction.
START TRANSACTION;
INSERT INTO orders VALUES (102, 1001, '2024-07-07 07:07:07.070707', 12.34, 'L102');
INSERT INTO order_lines VALUES (102, 1, 'SKU-9', 1, 12.340);
UPDATE accounts SET balance = balance - 12.34 WHERE id = 1001;
DELETE FROM order_lines WHERE order_id = 100 AND line_no = 2;
COMMIT;

-- ALTER TABLE mid-stream: a column added (with a default) and one dropped.
ALTER TABLE orders ADD COLUMN note VARCHAR(40) NOT NULL DEFAULT 'none';
UPDATE orders SET note = 'rush' WHERE id = 100;
INSERT INTO orders (id, account_id, ordered_at, total, legacy, note) VALUES (103, 2, '2024-08-08 08:08:08', 0.01, 'L103', 'after add');
ALTER TABLE orders DROP COLUMN legacy;
UPDATE orders SET total = 100.00 WHERE id = 101;
INSERT INTO orders (id, account_id, ordered_at, total, note) VALUES (104, 3, '2024-09-09 09:09:09.9', 5.00, 'after drop');
DELETE FROM orders WHERE id = 103;

-- The large batch: inserts, then updates and deletes of some of them.
INSERT INTO events (id, kind, amount, at, span, payload)
WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < @batch_rows)
SELECT n, ELT(1 + n % 4, 'view', 'click', 'buy', 'refund'),
       IF(n % 7 = 0, NULL, (n % 100000) / 100 - 500),
       '2024-01-01 00:00:00' + INTERVAL n SECOND + INTERVAL (n % 1000000) MICROSECOND,
       SEC_TO_TIME((n % 200000) - 100000) + INTERVAL (n % 1000) MICROSECOND,
       IF(n % 5 = 0, NULL, JSON_OBJECT('n', n, 'tag', CONCAT('t', n % 13)))
FROM seq;
UPDATE events SET amount = amount + 0.01, kind = 'updated' WHERE id % 10 = 0;
DELETE FROM events WHERE id % 9 = 0;

INSERT INTO workload_end VALUES (1, 'workload-end');
