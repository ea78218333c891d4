package api_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	"lectern/api"
)

// Per-address limits key on the client behind a trusted proxy, and on the
// peer itself when the forwarding headers come from anyone else.
func TestForwardedClientAddresses(t *testing.T) {
	t.Parallel()
	sendCode := func(e *env, headers ...string) int {
		return e.do(t, "POST", "/user/email/send-code", map[string]string{"email": uniqueEmail()}, "", headers...).Status
	}

	t.Run("behind a trusted proxy each client has its own bucket", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envConfig{addressLimit: 2, trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
		for range 2 {
			if got := sendCode(e, "X-Forwarded-For", "203.0.113.7"); got != http.StatusOK {
				t.Fatalf("within the limit: %d", got)
			}
		}
		if got := sendCode(e, "X-Forwarded-For", "203.0.113.7"); got != http.StatusTooManyRequests {
			t.Errorf("the third from 203.0.113.7: %d, want 429", got)
		}
		// Another client through the same proxy, named either way.
		if got := sendCode(e, "X-Forwarded-For", "198.51.100.9, 127.0.0.1"); got != http.StatusOK {
			t.Errorf("another client through a chain of trusted proxies: %d, want 200", got)
		}
		// A client cannot pick its bucket by writing its own first hop: the
		// nearest untrusted hop counts.
		if got := sendCode(e, "X-Forwarded-For", "192.0.2.1, 203.0.113.7"); got != http.StatusTooManyRequests {
			t.Errorf("a spoofed first hop before 203.0.113.7: %d, want 429", got)
		}
		// Nor by sending the header the proxy does not write, which it
		// passes through as it came: a new address in each must not give
		// 203.0.113.7 a new bucket.
		for i := range 3 {
			forged := fmt.Sprintf("for=198.51.100.%d", 100+i)
			if got := sendCode(e, "X-Forwarded-For", "203.0.113.7", "Forwarded", forged); got != http.StatusTooManyRequests {
				t.Errorf("203.0.113.7 with a forged Forwarded: %s: %d, want 429", forged, got)
			}
		}
	})
	t.Run("a proxy that writes Forwarded", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envConfig{addressLimit: 2, trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
			forwardedHeader: api.HeaderForwarded})
		client := `for="[2001:db8::1]:4711";proto=https`
		for range 2 {
			if got := sendCode(e, "Forwarded", client); got != http.StatusOK {
				t.Fatalf("within the limit: %d", got)
			}
		}
		if got := sendCode(e, "Forwarded", client); got != http.StatusTooManyRequests {
			t.Errorf("the third from 2001:db8::1: %d, want 429", got)
		}
		if got := sendCode(e, "Forwarded", "for=192.0.2.10, for=127.0.0.1"); got != http.StatusOK {
			t.Errorf("another client through a chain of trusted proxies: %d, want 200", got)
		}
		for i := range 3 {
			forged := fmt.Sprintf("198.51.100.%d", 100+i)
			if got := sendCode(e, "Forwarded", client, "X-Forwarded-For", forged); got != http.StatusTooManyRequests {
				t.Errorf("2001:db8::1 with a forged X-Forwarded-For %s: %d, want 429", forged, got)
			}
		}
	})
	t.Run("without trusted proxies the headers are ignored", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envConfig{addressLimit: 2})
		for i, xff := range []string{"203.0.113.1", "203.0.113.2"} {
			if got := sendCode(e, "X-Forwarded-For", xff); got != http.StatusOK {
				t.Fatalf("request %d: %d", i, got)
			}
		}
		if got := sendCode(e, "X-Forwarded-For", "203.0.113.3"); got != http.StatusTooManyRequests {
			t.Errorf("a third address in X-Forwarded-For from an untrusted peer: %d, want 429 (one bucket)", got)
		}
	})
}

func TestParseForwardedHeader(t *testing.T) {
	for in, want := range map[string]string{"": api.HeaderXForwardedFor, "x-forwarded-for": api.HeaderXForwardedFor,
		" Forwarded ": api.HeaderForwarded} {
		if got, err := api.ParseForwardedHeader(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := api.ParseForwardedHeader("X-Real-IP"); err == nil {
		t.Error("X-Real-IP was taken")
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := api.ParseTrustedProxies(" 10.1.2.3/8, 192.0.2.1 ,::1,")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("::1/128")}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	if _, err := api.ParseTrustedProxies("10.0.0.0/8,proxy.example.com"); err == nil {
		t.Error("a host name was taken for a proxy address")
	}
}
