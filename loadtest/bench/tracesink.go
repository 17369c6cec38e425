package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sync"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// traceSink is the OTLP/HTTP collector of the tracing configuration: a server on a free loopback
// port that takes POST /v1/traces as a collector would (protobuf or JSON, gzip or not), counts
// the exports, their bytes and the spans in them, answers 200 with an empty
// ExportTraceServiceResponse, and keeps nothing. The replicas export to it for real, so the
// tracing-on phases pay the whole cost of tracing, serialisation and HTTP included, and its counts
// prove that they did; a collector such as Jaeger would add its own CPU to the machine's.
type traceSink struct {
	URL string // base URL: OTEL_EXPORTER_OTLP_ENDPOINT

	srv  *http.Server
	done chan struct{}

	mu     sync.Mutex
	counts sinkCounts
}

// sinkCounts is what a traceSink received.
type sinkCounts struct {
	Exports int   `json:"exports"`
	Spans   int   `json:"spans"`
	Bytes   int64 `json:"bytes"`
	// Refused are requests it could not read (answered 400): any is a bug of the sink or of the
	// exporter, noted in the report.
	Refused int `json:"refused,omitempty"`
}

// sub returns c − o: what arrived between two snapshots.
func (c sinkCounts) sub(o sinkCounts) sinkCounts {
	return sinkCounts{Exports: c.Exports - o.Exports, Spans: c.Spans - o.Spans, Bytes: c.Bytes - o.Bytes, Refused: c.Refused - o.Refused}
}

// startTraceSink listens on 127.0.0.1:0 and serves until close.
func startTraceSink() (*traceSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the trace sink: %w", err)
	}
	s := &traceSink{URL: "http://" + ln.Addr().String(), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.export)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // ErrServerClosed after close
	}()
	return s, nil
}

func (s *traceSink) export(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	n := int64(len(body))
	var spans int
	if err == nil {
		spans, err = countSpans(body, r.Header.Get("Content-Type"), r.Header.Get("Content-Encoding"))
	}
	s.mu.Lock()
	s.counts.Bytes += n
	if err != nil {
		s.counts.Refused++
	} else {
		s.counts.Exports++
		s.counts.Spans += spans
	}
	s.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse: everything accepted
}

// snapshot returns what the sink has received so far.
func (s *traceSink) snapshot() sinkCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// close stops the server and waits for it.
func (s *traceSink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}

// countSpans decodes one OTLP/HTTP export body (an ExportTraceServiceRequest, protobuf or JSON
// by its content type, gzip-compressed if its content encoding says so) and returns the spans
// it holds.
func countSpans(body []byte, contentType, contentEncoding string) (int, error) {
	switch contentEncoding {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return 0, fmt.Errorf("gzip: %w", err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			return 0, fmt.Errorf("gzip: %w", err)
		}
	default:
		return 0, fmt.Errorf("content encoding %q", contentEncoding)
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	var req coltrace.ExportTraceServiceRequest
	switch mt {
	case "application/x-protobuf", "":
		if err := proto.Unmarshal(body, &req); err != nil {
			return 0, fmt.Errorf("protobuf: %w", err)
		}
	case "application/json":
		if err := protojson.Unmarshal(body, &req); err != nil {
			return 0, fmt.Errorf("json: %w", err)
		}
	default:
		return 0, errors.New("content type " + contentType)
	}
	n := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	return n, nil
}
