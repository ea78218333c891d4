package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/cors"
)

// corsExposed are the response headers a browser page may read: read-your-
// writes (X-Event-Position, X-Projection-Pending), request ids, back-off and
// created resources.
var corsExposed = []string{"X-Event-Position", "X-Projection-Pending", "X-Request-ID", "Retry-After", "Location", "Idempotent-Replayed"}

// corsMiddleware lets pages of origins call the API: preflights answered,
// the answers readable. Credentials are bearer tokens a page sends itself,
// never cookies, so none are allowed and "*" is a valid choice.
func corsMiddleware(origins []string) func(http.Handler) http.Handler {
	return cors.Handler(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete},
		// Every request header the API reads: read-your-writes, request and
		// correlation ids, and the trace context a page continues.
		AllowedHeaders: []string{"Authorization", "Content-Type", "Accept", "Idempotency-Key", "X-Request-ID", "X-Correlation-ID",
			"X-Min-Position", "traceparent", "tracestate"},
		ExposedHeaders:   corsExposed,
		AllowCredentials: false,
		MaxAge:           600, // seconds a browser may keep a preflight's answer
	})
}

// ParseCORSOrigins reads LECTERN_CORS_ORIGINS: origins separated by commas,
// each "*" or scheme://host[:port] (http or https, no path).
func ParseCORSOrigins(s string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(s, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o != "*" {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
				u.RawQuery != "" || u.User != nil {
				return nil, fmt.Errorf("LECTERN_CORS_ORIGINS: %q is not an origin such as https://app.example.com", o)
			}
			o = u.Scheme + "://" + u.Host
		}
		out = append(out, o)
	}
	return out, nil
}
