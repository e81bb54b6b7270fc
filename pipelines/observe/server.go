package observe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/cdclake/cdclake/config/secrets"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves the metrics and probes over HTTP:
//
//	/metrics   Prometheus text format (or OpenMetrics when asked)
//	/healthz   200 "ok" while the process is alive, 503 and why otherwise
//	/readyz    200 with each check's result when all hold, 503 otherwise;
//	           the body names each check and says why one fails
type Server struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
	// done is closed when Serve has returned.
	done chan struct{}
}

// Listen binds addr (host:port; port 0 picks one) for the endpoint. An
// address in use is an error: an instance that cannot be observed must
// not run silently.
func Listen(addr string, g prometheus.Gatherer, h *Health, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorLog: slogPrinter{log}}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.Live(); err != nil {
			http.Error(w, "not alive: "+secrets.Redact(err.Error()), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		results, ok := h.Ready(r.Context())
		var b strings.Builder
		for _, res := range results {
			if res.Err != nil {
				fmt.Fprintf(&b, "%s: failed: %s\n", res.Name, strings.ReplaceAll(secrets.Redact(res.Err.Error()), "\n", "; "))
			} else {
				fmt.Fprintf(&b, "%s: ok\n", res.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, b.String())
	})
	s := &Server{ln: ln, log: log, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until Close.
func (s *Server) Serve() {
	defer close(s.done)
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("metrics endpoint stopped", "err", err)
	}
}

// Close stops serving, letting requests in flight finish for a second,
// and waits for Serve to return.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}

// slogPrinter logs promhttp's errors.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Error("serving metrics", "err", fmt.Sprint(v...)) }
