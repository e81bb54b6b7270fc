// Package observe is what an operator sees of a running cdclake: its log
// lines (NewLogger: text or JSON, one event per line, secrets removed), its
// health (Health: liveness and readiness checks) and the HTTP endpoint
// serving both with the Prometheus metrics (Server: /metrics, /healthz,
// /readyz).
//
// The metrics themselves are defined by package pipelines, which composes
// the stages and reads their counters; this package knows nothing of the
// stages.
package observe
