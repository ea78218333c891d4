package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"lectern/ratelimit"
)

// ParseTrustedProxies parses LECTERN_TRUSTED_PROXIES: comma-separated CIDRs
// or single addresses of the proxies whose forwarding headers are believed.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs error
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(item); err == nil {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		errs = errors.Join(errs, fmt.Errorf("LECTERN_TRUSTED_PROXIES: %q is neither a CIDR nor an address", item))
	}
	return out, errs
}

// The forwarding headers a trusted proxy may name the client in.
const (
	HeaderXForwardedFor = "X-Forwarded-For"
	HeaderForwarded     = "Forwarded" // RFC 7239
)

// ParseForwardedHeader parses LECTERN_FORWARDED_HEADER: which one header
// the trusted proxies write, X-Forwarded-For (the default) or Forwarded.
// Only that one is read: a proxy passes the other through as the client
// sent it, and reading it would let the client choose its own bucket.
func ParseForwardedHeader(v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "x-forwarded-for":
		return HeaderXForwardedFor, nil
	case "forwarded":
		return HeaderForwarded, nil
	}
	return "", fmt.Errorf("LECTERN_FORWARDED_HEADER: %q is neither X-Forwarded-For nor Forwarded", v)
}

// clientAddr is the client address that per-address limits are kept by (an
// IPv6 one by its /64, ratelimit.AddressKey). It is the peer's address,
// unless the peer is a trusted proxy: then the forwarding chain of the one
// header the proxies write (ForwardedHeader) is walked from the nearest hop
// outwards, and the first address that is not a trusted proxy is the
// client's. Headers from anyone else, and the other header, are ignored: a
// client cannot choose its own bucket.
func (s *Server) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(peer) {
		return ratelimit.AddressKey(host)
	}
	var chain []string
	if s.deps.ForwardedHeader == HeaderForwarded {
		chain = forwardedFor(r.Header.Values(HeaderForwarded))
	} else {
		for _, v := range r.Header.Values(HeaderXForwardedFor) {
			for _, hop := range strings.Split(v, ",") {
				chain = append(chain, strings.TrimSpace(hop))
			}
		}
	}
	client := peer
	for i := len(chain) - 1; i >= 0; i-- {
		a, err := parseHop(chain[i])
		if err != nil {
			break // a malformed hop: trust stops at the last proxy that wrote well
		}
		client = a
		if !s.trusted(a) {
			break
		}
	}
	return ratelimit.AddressKey(client.String())
}

func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.deps.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor lists the for= values of RFC 7239 Forwarded headers, in order.
func forwardedFor(values []string) []string {
	var out []string
	for _, v := range values {
		for _, element := range strings.Split(v, ",") {
			for _, pair := range strings.Split(element, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					out = append(out, strings.Trim(val, `"`))
				}
			}
		}
	}
	return out
}

// parseHop reads one hop: an address, with or without a port, IPv6 in
// brackets or not.
func parseHop(hop string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(hop); err == nil {
		return ap.Addr().Unmap(), nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(hop, "["), "]"))
	return a.Unmap(), err
}
