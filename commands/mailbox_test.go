package commands

import "testing"

func TestMailboxKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ email, want string }{
		{"ann@example.com", "ann@example.com"},
		{" Ann@Example.COM ", "ann@example.com"},
		// A subaddress reaches the same mailbox; a leading + is the name.
		{"ann+news@example.com", "ann@example.com"},
		{"ann+a+b@example.com", "ann@example.com"},
		{"+ann@example.com", "+ann@example.com"},
		// Dots count everywhere but at Gmail.
		{"a.n.n@example.com", "a.n.n@example.com"},
		{"A.n.n+x@gmail.com", "ann@gmail.com"},
		{"ann@googlemail.com", "ann@gmail.com"},
		{"...@gmail.com", "...@gmail.com"},
		// An internationalized domain, as typed and as Punycode.
		{"ann@bücher.example.com", "ann@xn--bcher-kva.example.com"},
		{"ann@BÜCHER.example.com", "ann@xn--bcher-kva.example.com"},
		{"ann@xn--bcher-kva.example.com", "ann@xn--bcher-kva.example.com"},
		// A domain IDNA finds fault with (the bidi rule) is mapped all the same.
		{"ann@\u0661\u0662\u0663.\uff45xample.com", "ann@xn--9hbcd.example.com"},
		{"ann@\u0661\u0662\u0663.example.com", "ann@xn--9hbcd.example.com"},
		// The same letters, composed and decomposed (NFC).
		{"jos\u00e9@example.com", "jos\u00e9@example.com"},
		{"jose\u0301@example.com", "jos\u00e9@example.com"},
		// What is not an address is kept as it is (lower-cased).
		{"Nobody", "nobody"},
	} {
		if got := MailboxKey(c.email); got != c.want {
			t.Errorf("MailboxKey(%q) = %q, want %q", c.email, got, c.want)
		}
	}
}
