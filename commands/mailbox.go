package commands

import (
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"
)

// SendCodeBucket is the rate-limit window of the codes sent to email's
// mailbox (Limits.SendCode).
func SendCodeBucket(email string) string { return "send-code:" + MailboxKey(email) }

// MailboxKey is the key under which e-mails sent to email are counted: one
// key for the spellings that reach the same mailbox, so that a limit on
// codes sent to an address cannot be stepped round by spelling it anew.
// Accounts keep the address as typed (NormalizeEmail): two spellings may be
// two accounts, but they share one inbox and so one limit. Folded together:
//   - letter case, and Unicode's canonically equivalent forms (NFC);
//   - an internationalized domain and its Punycode (IDNA);
//   - a subaddress: "ann+tag@x" is delivered to ann@x by most providers
//     (RFC 5233), whatever the tag;
//   - at Gmail, the dots of the local part and googlemail.com.
func MailboxKey(email string) string {
	email = norm.NFC.String(NormalizeEmail(email))
	at := strings.LastIndexByte(email, '@')
	if at < 0 {
		return email
	}
	local, domain := email[:at], email[at+1:]
	// A domain that fails a rule of IDNA's (bidi, say) still comes back
	// mapped and encoded: that is its key all the same.
	if ascii, _ := idna.Lookup.ToASCII(domain); ascii != "" {
		domain = ascii
	}
	if plus := strings.IndexByte(local, '+'); plus > 0 {
		local = local[:plus]
	}
	if domain == "googlemail.com" {
		domain = "gmail.com"
	}
	if domain == "gmail.com" {
		if dotless := strings.ReplaceAll(local, ".", ""); dotless != "" {
			local = dotless
		}
	}
	return local + "@" + domain
}
