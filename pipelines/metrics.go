package pipelines

import (
	"errors"
	"github.com/cdclake/cdclake/sinks/lakehouse"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cdclake/cdclake/handlers/batch"
	"github.com/cdclake/cdclake/handlers/change"
	"github.com/cdclake/cdclake/pipelines/source/kafka"
	"github.com/cdclake/cdclake/sinks/lake"
	"github.com/cdclake/cdclake/sinks/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are a pipeline's Prometheus metrics (docs/operations.md lists
// them). The counters the stages keep anyway (messages, events, memory,
// the store's failures, the group's events, the registry's lookups) are
// read when the metrics are scraped (collector), so that landing pays
// nothing for them; what is told once per file, dead letter or state
// write is counted as it happens.
type metrics struct {
	tables *tableLabels

	files        *prometheus.CounterVec // by cause
	tableFiles   *prometheus.CounterVec // by table
	rows         *prometheus.CounterVec // by table
	bytes        *prometheus.CounterVec // by table
	fileSize     prometheus.Histogram
	fileWrite    prometheus.Histogram
	deadLetters  *prometheus.CounterVec // by stage, class
	stateWrites  *prometheus.CounterVec // by result
	stateSeconds prometheus.Histogram
	unreadable   prometheus.Counter
	pruneErrors  prometheus.Counter
}

const ns = "cdclake"

func newMetrics(reg prometheus.Registerer, tables *tableLabels) *metrics {
	f := func(c prometheus.Collector) prometheus.Collector { reg.MustRegister(c); return c }
	m := &metrics{tables: tables}
	m.files = f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "files_written_total",
		Help: "Parquet files stored, by why each was closed (rows, bytes, age, ddl, schema, memory, open_files, handover, replay, shutdown)."},
		[]string{"cause"})).(*prometheus.CounterVec)
	for _, c := range batch.Causes {
		m.files.WithLabelValues(string(c))
	}
	m.tableFiles = f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "table_files_written_total",
		Help: "Parquet files stored, by table."}, []string{"table"})).(*prometheus.CounterVec)
	m.rows = f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rows_landed_total",
		Help: "Rows in stored files (change rows, and the rows of the event datasets _ddl, _transactions, …), by table."},
		[]string{"table"})).(*prometheus.CounterVec)
	m.bytes = f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "written_bytes_total",
		Help: "Bytes of stored Parquet files, by table."}, []string{"table"})).(*prometheus.CounterVec)
	m.fileSize = f(prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "file_size_bytes",
		Help: "Size of stored Parquet files.", Buckets: prometheus.ExponentialBuckets(4<<10, 4, 10)})).(prometheus.Histogram)
	m.fileWrite = f(prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "file_write_seconds",
		Help: "Time to store a Parquet file, retries included.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)})).(prometheus.Histogram)
	m.deadLetters = f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "dead_letters_total",
		Help: "Messages written to the dead letters, by the stage that failed them and the class of the reason."},
		[]string{"stage", "class"})).(*prometheus.CounterVec)
	m.stateWrites = f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "state_writes_total",
		Help: "Partition state objects created in the lake, by result: ok, fenced (another instance owns the partition), error."},
		[]string{"result"})).(*prometheus.CounterVec)
	for _, r := range []string{"ok", "fenced", "error"} {
		m.stateWrites.WithLabelValues(r)
	}
	m.stateSeconds = f(prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "state_write_seconds",
		Help: "Time to create a partition state object, retries included.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)})).(prometheus.Histogram)
	m.unreadable = f(prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "state_unreadable_total",
		Help: "Partition state objects passed over at a claim because they do not hold their state (each is logged with its key)."})).(prometheus.Counter)
	m.pruneErrors = f(prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "state_prune_errors_total",
		Help: "Deletes of old partition states or catalog entries the store failed (the first is logged at WARN); landing goes on."})).(prometheus.Counter)
	return m
}

// fileWritten counts a stored file (batch.Config.Written).
func (m *metrics) fileWritten(f batch.WrittenFile) {
	t := m.tables.label(f.Table)
	m.files.WithLabelValues(string(f.Cause)).Inc()
	m.tableFiles.WithLabelValues(t).Inc()
	m.rows.WithLabelValues(t).Add(float64(f.Rows))
	m.bytes.WithLabelValues(t).Add(float64(f.Bytes))
	m.fileSize.Observe(float64(f.Bytes))
	m.fileWrite.Observe(f.Took.Seconds())
}

// stateAppended counts a state write (state.Store.Appended).
func (m *metrics) stateAppended(took time.Duration, err error) {
	result := "ok"
	switch {
	case errors.Is(err, state.ErrFenced):
		result = "fenced"
	case err != nil:
		result = "error"
	}
	m.stateWrites.WithLabelValues(result).Inc()
	m.stateSeconds.Observe(took.Seconds())
}

// tableLabels bounds the values of the table label: a table a route
// matches, or one of the first max tables seen, has its own; every other
// shares "_other". The event datasets (_ddl, _transactions, …) always
// have theirs.
type tableLabels struct {
	routed func(table string) bool
	max    int
	mu     sync.Mutex
	own    map[string]bool
	free   int // how many more unrouted tables get their own label
}

// otherTables is the label of the tables beyond the bound.
const otherTables = "_other"

func newTableLabels(max int, routed func(string) bool) *tableLabels {
	return &tableLabels{routed: routed, max: max, own: map[string]bool{}, free: max}
}

func (t *tableLabels) label(table string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if own, ok := t.own[table]; ok {
		if own {
			return table
		}
		return otherTables
	}
	own := strings.HasPrefix(table, "_") || t.routed(table)
	if !own && t.free > 0 {
		t.free--
		own = true
	}
	t.own[table] = own
	if own {
		return table
	}
	return otherTables
}

// BuildInfo returns the collector of cdclake_build_info{version,
// go_version, commit}.
func BuildInfo(version, commit string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "build_info",
		Help:        "Always 1: the labels say which cdclake runs.",
		ConstLabels: prometheus.Labels{"version": version, "go_version": runtime.Version(), "commit": commit}})
	g.Set(1)
	return g
}

// NewRegistry returns a registry with the Go runtime's and the process's
// collectors and cdclake_build_info.
func NewRegistry(version, commit string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		BuildInfo(version, commit))
	return reg
}

// collector reads the counters the stages keep at every scrape.
type collector struct{ p *Pipeline }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(ns+"_"+name, help, labels, nil)
}

var (
	descMessages  = desc("messages_read_total", "Messages read from the source.")
	descReadBytes = desc("read_bytes_total", "Bytes of the messages read.")
	descEvents    = desc("events_total", "Messages read, by what they were classified as: dml, ddl, schema_change, transaction, "+
		"stream_metadata, object_metadata, schema_record, heartbeat, tombstone, message.", "kind")
	descSkipped = desc("skipped_messages_total", "Messages that needed no landing, by reason: filtered (tables.exclude), "+
		"tombstone, heartbeat, logical_message, in_table (rows an input landed again has in its lakehouse table already).", "reason")
	descOpenFiles   = desc("open_files", "Files open (being filled).")
	descBuffered    = desc("buffered_bytes", "Memory of open files and files being written, against max_buffered_bytes.")
	descSpilled     = desc("spilled_bytes", "The part of buffered_bytes that open files keep as compressed rows (spilled).")
	descMaxBuffered = desc("max_buffered_bytes", "batch.max_buffered_bytes.")
	descFenced      = desc("fenced_partitions_total", "Partitions given up because another instance took them over.")
	descProgress    = desc("last_progress_timestamp_seconds", "When something last became durable (a file, a dead letter, "+
		"a message needing no landing), as Unix time.")
	descStoreErrors = desc("store_errors_total", "Failed writes to the object store, by op (data, create, object); "+
		"each failed retry counts.", "op")
	descStoreRetries = desc("store_retries_total", "Writes to the object store tried again after a failure.")
	descStoreOutage  = desc("store_outage_seconds_total", "Time the object store failed writes, the current outage included.")
	descStoreFailing = desc("store_failing", "1 while the object store fails writes (an outage in progress), else 0.")
	descRegLookups   = desc("registry_lookups_total", "Schema lookups, by result: cache_hit, found, not_found (an unknown id), "+
		"unavailable (the registry did not answer).", "result")
	descRegWait = desc("registry_wait_seconds_total", "Time partitions waited for an unavailable schema registry.")
	descLag     = desc("kafka_lag_records", "Records between a partition's end offset at the last fetch and the offset "+
		"committed for what the lake holds.", "topic", "partition")
	descCommitAt = desc("kafka_last_commit_timestamp_seconds", "When this instance last committed a partition's offset, as Unix time.",
		"topic", "partition")
	descAssignedNow = desc("kafka_assigned_partitions", "Partitions assigned to this instance.")
	descUnclaimed   = desc("kafka_unclaimed_partitions", "Assigned partitions whose state in the lake could not be claimed: "+
		"they wait, unread, and are claimed again every commit interval.")
	descCommits = desc("table_commits_total", "Snapshots (Iceberg) and versions (Delta) committed to lakehouse tables, "+
		"one per table and commit (table_format: iceberg or delta).")
	descHanded = desc("iceberg_committer_commits_total", "Iceberg commits that went to the committer process "+
		"(cdclake-lakehouse) rather than in process (sink.iceberg.appends): what the in-process appends do not write; "+
		"the reason is logged at INFO once per table and reason.")
	descCommitFiles  = desc("table_commit_files_total", "Files added to lakehouse tables.")
	descCommitErrors = desc("table_commit_errors_total", "Commits to a lakehouse table that failed (each logged at WARN): "+
		"the files stay held and are committed again; past sink.retry_for the run fails.")
	descCompacted = desc("table_compacted_files_total", "Files of lakehouse tables that the run's compaction "+
		"(sink.iceberg.compact_interval, sink.delta.compact_interval) rewrote into larger ones.")
	descCompactErrors = desc("table_compact_errors_total", "Compactions and snapshot expiries of a lakehouse table that failed "+
		"(each logged at WARN); landing goes on, and the table is compacted again next time.")
	descExpired = desc("table_expired_snapshots_total", "Snapshots of lakehouse tables that the run's expiry "+
		"(sink.iceberg.expire_older_than) dropped.")
	descStateBuilds = desc("current_builds_total", "Builds of current-state tables (sink.current.interval), each bringing "+
		"one table up to date.")
	descStateErrors = desc("current_build_errors_total", "Builds of a current-state table that failed (each logged at WARN); "+
		"landing goes on, and the table is built again next time.")
	descStateChanges = desc("current_changes_total", "Change rows folded into current-state tables.")
	descStateMerged  = desc("current_merged_builds_total", "Builds of merge-on-read current-state tables that wrote the rows "+
		"their changes touched and deletion vectors (sink.current.mode); the others wrote the buckets they touched whole.")
	descCommitWait = desc("table_files_waiting", "Written files waiting to be committed to their lakehouse tables: their "+
		"offsets do not count as landed until they are.")
	descGaps = desc("kafka_gaps_total", "Gaps recorded in the lake (_gaps/): messages deleted from the log before they landed, "+
		"skipped with on_gap=skip.")
	descRebalances = desc("kafka_rebalances_total", "Changes of this instance's assignment.")
	descPartEvents = desc("kafka_partitions_total", "Partitions assigned to this instance, revoked (handed over), lost "+
		"(taken without a handover) and claimed (their state in the lake taken over), by event.", "event")
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMessages, descReadBytes, descEvents, descSkipped, descOpenFiles, descBuffered,
		descSpilled, descMaxBuffered, descFenced, descProgress, descStoreErrors, descStoreRetries, descStoreOutage,
		descStoreFailing, descRegLookups, descRegWait, descLag, descCommitAt, descAssignedNow, descRebalances, descPartEvents,
		descGaps, descUnclaimed, descCommits, descHanded, descCommitFiles, descCommitErrors, descCommitWait, descCompacted, descCompactErrors, descExpired,
		descStateBuilds, descStateErrors, descStateChanges, descStateMerged} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	p := c.p
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := &p.stats
	counter(descMessages, float64(st.Messages.Load()))
	counter(descReadBytes, float64(st.Bytes.Load()))
	for k := change.Kind(1); int(k) < change.NumKinds; k++ {
		counter(descEvents, float64(st.Kinds[k].Load()), k.String())
	}
	counter(descSkipped, float64(st.Filtered.Load()), "filtered")
	counter(descSkipped, float64(st.Tombstones.Load()), "tombstone")
	counter(descSkipped, float64(st.Heartbeats.Load()), "heartbeat")
	counter(descSkipped, float64(st.Skipped.Load()), "logical_message")
	counter(descSkipped, float64(st.InTable.Load()), "in_table")

	b := p.batcher
	mem := b.Memory()
	gauge(descOpenFiles, float64(b.OpenFiles()))
	gauge(descBuffered, float64(mem.Buffered))
	gauge(descSpilled, float64(mem.Spilled))
	gauge(descMaxBuffered, float64(mem.Bound))
	counter(descFenced, float64(b.Fenced()))
	gauge(descProgress, float64(p.durable.at().UnixMilli())/1e3)

	if c := p.commits; c != nil {
		cs := c.stats()
		counter(descCommits, float64(cs.commits))
		counter(descCommitFiles, float64(cs.files))
		if f, ok := c.ice.(*lakehouse.Formats); ok {
			if h, ok := f.Iceberg.(interface{ Handed() int64 }); ok {
				counter(descHanded, float64(h.Handed()))
			}
		}
		counter(descCommitErrors, float64(cs.errors))
		gauge(descCommitWait, float64(cs.waiting))
		counter(descCompacted, float64(cs.compacted))
		counter(descCompactErrors, float64(cs.compactErrors))
		counter(descExpired, float64(cs.expired))
	}

	if s := p.current; s != nil {
		st := s.stats()
		counter(descStateBuilds, float64(st.builds))
		counter(descStateErrors, float64(st.errors))
		counter(descStateChanges, float64(st.changes))
		counter(descStateMerged, float64(st.merged))
	}

	ss := p.sink.Stats()
	for op := lake.OpData; op <= lake.OpRead; op++ {
		counter(descStoreErrors, float64(ss.Errors[op]), op.String())
	}
	counter(descStoreRetries, float64(ss.Retries))
	counter(descStoreOutage, ss.Outage.Seconds())
	failing := 0.0
	if !ss.Failing.IsZero() {
		failing = 1
	}
	gauge(descStoreFailing, failing)

	if codec := p.plan.avro; codec != nil {
		cs := codec.Stats()
		counter(descRegLookups, float64(cs.Hits), "cache_hit")
		counter(descRegLookups, float64(cs.Found), "found")
		counter(descRegLookups, float64(cs.Missing), "not_found")
		counter(descRegLookups, float64(cs.Failed), "unavailable")
		counter(descRegWait, time.Duration(st.RegistryWait.Load()).Seconds())
	}

	if k, ok := p.source.(*kafka.Source); ok {
		parts := k.Partitions()
		gauge(descAssignedNow, float64(len(parts)))
		for _, ps := range parts {
			part := strconv.Itoa(int(ps.Partition))
			if lag := ps.Lag(); lag >= 0 {
				gauge(descLag, float64(lag), ps.Topic, part)
			}
			if !ps.CommittedAt.IsZero() {
				gauge(descCommitAt, float64(ps.CommittedAt.UnixMilli())/1e3, ps.Topic, part)
			}
		}
		kc := k.Counters()
		counter(descRebalances, float64(kc.Rebalances))
		counter(descPartEvents, float64(kc.Assigned), "assigned")
		counter(descPartEvents, float64(kc.Revoked), "revoked")
		counter(descPartEvents, float64(kc.Lost), "lost")
		counter(descPartEvents, float64(kc.Claimed), "claimed")
		counter(descGaps, float64(p.gaps.Load()))
		gauge(descUnclaimed, float64(k.Unclaimed()))
	}
}
