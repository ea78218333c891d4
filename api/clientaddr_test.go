package api_test

import (
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
		if got := sendCode(e, "Forwarded", `for="[2001:db8::1]:4711";proto=https`); got != http.StatusOK {
			t.Errorf("another client named by Forwarded: %d, want 200", got)
		}
		// A client cannot pick its bucket by writing its own first hop: the
		// nearest untrusted hop counts.
		if got := sendCode(e, "X-Forwarded-For", "192.0.2.1, 203.0.113.7"); got != http.StatusTooManyRequests {
			t.Errorf("a spoofed first hop before 203.0.113.7: %d, want 429", got)
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
