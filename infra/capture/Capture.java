// Capture: reads Kafka topics from the beginning to their end offsets (taken
// when it starts reading) with the real Kafka consumer, and writes each
// topic's message values, one per line, to OUT/<topic>.ndjson and its keys to
// OUT/keys/<topic>.ndjson (line n of one is the key of line n of the other).
// A null value (tombstone) or null key is an empty line. Partitions are
// written one after the other in partition order, each in offset order, so
// every key's changes keep their order. OUT/_manifest.tsv lists, per topic
// partition, the first line and the Kafka offsets it holds.
//
// Topics matching --base64 carry binary messages (Confluent-framed Avro)
// that a line cannot hold as they are: they go to OUT/<topic>.b64 and
// OUT/keys/<topic>.b64, one base64-encoded message per line, and the
// registry ids their framed messages name (magic byte 0, 4-byte id) are
// listed in OUT/_schema_ids.txt.
//
// Run with Java 17's single-file launcher on Kafka's jars:
//   java -cp "$KAFKA_LIBS/*" infra/capture/Capture.java --bootstrap 127.0.0.1:59092 \
//        --include 'shop\..*' --out DIR [--base64 REGEX] [--await TOPIC=TEXT ...] [--timeout SECONDS]
// --await waits (up to --timeout) until TOPIC holds a message whose value
// contains TEXT (or TEXT in base64, as a logical decoding message's content)
// before the end offsets are taken.
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Capture {
  public static void main(String[] args) throws Exception {
    String bootstrap = null, include = null, out = null, base64 = "(?!)";
    long timeoutS = 180;
    Map<String, String> awaits = new TreeMap<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--bootstrap": bootstrap = args[++i]; break;
        case "--include": include = args[++i]; break;
        case "--out": out = args[++i]; break;
        case "--base64": base64 = args[++i]; break;
        case "--timeout": timeoutS = Long.parseLong(args[++i]); break;
        case "--await": {
          String a = args[++i];
          int eq = a.indexOf('=');
          if (eq <= 0) die("--await wants TOPIC=TEXT, got " + a);
          awaits.put(a.substring(0, eq), a.substring(eq + 1));
          break;
        }
        default: die("unknown argument " + args[i]);
      }
    }
    if (bootstrap == null || include == null || out == null) die("--bootstrap, --include and --out are required");
    long deadline = System.nanoTime() + Duration.ofSeconds(timeoutS).toNanos();

    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, "cdclake-capture");
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      for (Map.Entry<String, String> a : awaits.entrySet()) await(c, a.getKey(), a.getValue(), deadline);

      Pattern pat = Pattern.compile(include), binary = Pattern.compile(base64);
      List<TopicPartition> tps = new ArrayList<>();
      for (Map.Entry<String, List<PartitionInfo>> e : c.listTopics(Duration.ofSeconds(30)).entrySet()) {
        if (!pat.matcher(e.getKey()).matches()) continue;
        for (PartitionInfo pi : e.getValue()) tps.add(new TopicPartition(pi.topic(), pi.partition()));
      }
      if (tps.isEmpty()) die("no topic matches " + include);
      tps.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
      c.assign(tps);
      c.seekToBeginning(tps);
      Map<TopicPartition, Long> begin = c.beginningOffsets(tps), end = c.endOffsets(tps);

      Path dir = Path.of(out), tmp = dir.resolve(".parts");
      Files.createDirectories(tmp);
      Map<TopicPartition, OutputStream[]> files = new HashMap<>();
      Map<TopicPartition, long[]> seen = new HashMap<>(); // count, first offset, last offset
      for (TopicPartition tp : tps) {
        files.put(tp, new OutputStream[] {
          new BufferedOutputStream(Files.newOutputStream(tmp.resolve(tp + ".values")), 1 << 16),
          new BufferedOutputStream(Files.newOutputStream(tmp.resolve(tp + ".keys")), 1 << 16)});
        seen.put(tp, new long[] {0, -1, -1});
      }
      TreeSet<Integer> ids = new TreeSet<>();
      List<TopicPartition> pending = new ArrayList<>();
      for (TopicPartition tp : tps) if (end.get(tp) > begin.get(tp)) pending.add(tp);
      while (!pending.isEmpty()) {
        if (System.nanoTime() > deadline) die("timed out reading; still behind: " + pending);
        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
          TopicPartition tp = new TopicPartition(r.topic(), r.partition());
          if (r.offset() >= end.get(tp)) continue;
          OutputStream[] f = files.get(tp);
          if (binary.matcher(r.topic()).matches()) {
            line64(f[0], r.value());
            line64(f[1], r.key());
            schemaId(r.value(), ids);
            schemaId(r.key(), ids);
          } else {
            line(f[0], r.value(), r);
            line(f[1], r.key(), r);
          }
          long[] s = seen.get(tp);
          if (s[0]++ == 0) s[1] = r.offset();
          s[2] = r.offset();
        }
        pending.removeIf(tp -> c.position(tp) >= end.get(tp));
      }
      for (OutputStream[] f : files.values()) { f[0].close(); f[1].close(); }

      // One file per topic: its partitions in order.
      Files.createDirectories(dir.resolve("keys"));
      StringBuilder manifest = new StringBuilder("topic\tpartition\tfirst_line\tmessages\tfirst_offset\tlast_offset\tend_offset\n");
      Map<String, List<TopicPartition>> byTopic = new TreeMap<>();
      for (TopicPartition tp : tps) byTopic.computeIfAbsent(tp.topic(), k -> new ArrayList<>()).add(tp);
      long total = 0;
      for (Map.Entry<String, List<TopicPartition>> e : byTopic.entrySet()) {
        String topic = e.getKey();
        String ext = binary.matcher(topic).matches() ? ".b64" : ".ndjson";
        long line = 1;
        try (OutputStream v = Files.newOutputStream(dir.resolve(topic + ext));
             OutputStream k = Files.newOutputStream(dir.resolve("keys").resolve(topic + ext))) {
          for (TopicPartition tp : e.getValue()) {
            Files.copy(tmp.resolve(tp + ".values"), v);
            Files.copy(tmp.resolve(tp + ".keys"), k);
            long[] s = seen.get(tp);
            manifest.append(topic).append('\t').append(tp.partition()).append('\t').append(line).append('\t')
                .append(s[0]).append('\t').append(s[1]).append('\t').append(s[2]).append('\t').append(end.get(tp)).append('\n');
            line += s[0];
            total += s[0];
          }
        }
        System.err.printf("capture: %-45s %7d messages%n", topic, line - 1);
      }
      Files.writeString(dir.resolve("_manifest.tsv"), manifest.toString());
      if (!ids.isEmpty()) {
        StringBuilder sb = new StringBuilder();
        for (int id : ids) sb.append(id).append('\n');
        Files.writeString(dir.resolve("_schema_ids.txt"), sb.toString());
      }
      try (var s = Files.list(tmp)) { for (Path f : (Iterable<Path>) s::iterator) Files.delete(f); }
      Files.delete(tmp);
      System.err.printf("capture: %d topics, %d messages into %s%n", byTopic.size(), total, dir);
    }
  }

  static void await(KafkaConsumer<byte[], byte[]> c, String topic, String text, long deadline) throws InterruptedException {
    // Logical decoding messages carry their content as bytes: base64 in JSON.
    byte[] want = text.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    byte[] want64 = java.util.Base64.getEncoder().encode(want);
    while (true) {
      List<PartitionInfo> parts = c.listTopics(Duration.ofSeconds(10)).get(topic);
      if (parts != null && !parts.isEmpty()) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : parts) tps.add(new TopicPartition(topic, pi.partition()));
        c.assign(tps);
        c.seekToBeginning(tps);
        long until = Math.min(deadline, System.nanoTime() + Duration.ofSeconds(5).toNanos());
        while (System.nanoTime() < until) {
          for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
            if (r.value() != null && (indexOf(r.value(), want) >= 0 || indexOf(r.value(), want64) >= 0)) {
              System.err.printf("capture: %s holds \"%s\" (offset %d)%n", topic, text, r.offset());
              c.unsubscribe();
              return;
            }
          }
        }
      }
      if (System.nanoTime() > deadline) die("timed out waiting for \"" + text + "\" in topic " + topic);
      Thread.sleep(500);
    }
  }

  static int indexOf(byte[] hay, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= hay.length; i++) {
      for (int j = 0; j < needle.length; j++) if (hay[i + j] != needle[j]) continue outer;
      return i;
    }
    return -1;
  }

  static void line(OutputStream o, byte[] b, ConsumerRecord<?, ?> r) throws IOException {
    if (b != null) {
      for (byte x : b) {
        if (x == '\n' || x == '\r') {
          die("a message in " + r.topic() + "-" + r.partition() + "@" + r.offset() + " holds a line break; NDJSON cannot carry it");
        }
      }
      o.write(b);
    }
    o.write('\n');
  }

  static void line64(OutputStream o, byte[] b) throws IOException {
    if (b != null) o.write(java.util.Base64.getEncoder().encode(b));
    o.write('\n');
  }

  // schemaId adds the registry id of a Confluent-framed message to ids.
  static void schemaId(byte[] b, TreeSet<Integer> ids) {
    if (b != null && b.length >= 5 && b[0] == 0) ids.add(java.nio.ByteBuffer.wrap(b, 1, 4).getInt());
  }

  static void die(String msg) {
    System.err.println("capture: ERROR: " + msg);
    System.exit(1);
  }
}
