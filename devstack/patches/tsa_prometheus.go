package server

import (
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewPrometheusServer creates a server for serving prometheus metrics, on
// $TSA_METRICS_ADDR when set. waggle builds timestamp-server v2.1.3 with this file in place of
// upstream's pkg/server/prometheus.go, which fixes ":2112" of every interface (one per machine).
func NewPrometheusServer(readTimeout, writeTimeout time.Duration) *http.Server {
	addr := os.Getenv("TSA_METRICS_ADDR")
	if addr == "" {
		addr = ":2112"
	}
	return &http.Server{
		Addr:         addr,
		ReadTimeout:  readTimeout,
		WriteTimeout: writeTimeout,
		Handler:      promhttp.Handler(),
	}
}
