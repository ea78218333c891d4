package validation

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Email addresses are checked like pydantic's EmailStr, which calls
// email-validator (syntax only, no DNS) with its default options. The
// reasons below are that library's messages. Not reproduced: IDNA/Punycode
// processing of internationalized domains (they are only lower-cased here)
// and Unicode NFC normalization of the local part.

// maxEmailLength is pydantic's MAX_EMAIL_LENGTH, checked before anything else.
const maxEmailLength = 2048

// prettyEmail is pydantic's pretty_email_regex: `Name <addr>` or `"Name" <addr>`.
var prettyEmail = regexp.MustCompile(
	`^\s*(?:(?:[\p{L}\p{N}_!#$%&'*+\-/=?^` + "`" + `{|}~]+\s+)*[\p{L}\p{N}_!#$%&'*+\-/=?^` + "`" + `{|}~]+|"(?:[^"]|\")+")?\s*<(.+)>\s*$`)

// atext is RFC 5322 atext: the characters allowed unquoted before the @-sign.
const atext = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_!#$%&'*+-/=?^`{|}~"

// specialUseDomains are rejected with or without subdomains (email-validator's SPECIAL_USE_DOMAIN_NAMES).
var specialUseDomains = []string{"arpa", "invalid", "local", "localhost", "onion", "test"}

// caseInsensitiveMailboxes are the RFC 2142 local parts email-validator lower-cases.
var caseInsensitiveMailboxes = []string{
	"info", "marketing", "sales", "support", "abuse", "noc", "security",
	"postmaster", "hostmaster", "usenet", "news", "webmaster", "www", "uucp", "ftp",
}

func validateEmail(loc []any, in any) (any, *ErrorItem) {
	s, ok := in.(string)
	if !ok {
		return nil, errorPtr(newError("string_type", loc, in))
	}
	normalized, reason := normalizeEmail(s)
	if reason != "" {
		return nil, errorPtr(emailError(loc, in, reason))
	}
	return normalized, nil
}

// normalizeEmail returns the normalized address (domain lower-cased, local
// part as given) or the reason it is not valid.
func normalizeEmail(value string) (string, string) {
	if utf8.RuneCountInString(value) > maxEmailLength {
		return "", fmt.Sprintf("Length must not exceed %d characters", maxEmailLength)
	}
	if m := prettyEmail.FindStringSubmatch(value); m != nil {
		value = m[1]
	}
	email := strings.TrimSpace(value)

	local, rest, found := cutUnquoted(email, "@<")
	if !found {
		if strings.ContainsRune(email, '＠') {
			return "", `The email address has the "full-width" at-sign (@) character instead of a regular at-sign.`
		}
		if strings.ContainsRune(email, '﹫') {
			return "", `The email address has the "small commercial at" character instead of a regular at-sign.`
		}
		return "", "An email address must have an @-sign."
	}
	if strings.HasPrefix(rest, "<") {
		// A display name that pretty_email_regex did not take apart.
		name, quotedName, reason := unquoteLocalPart(strings.TrimRightFunc(local, unicode.IsSpace))
		if reason != "" {
			return "", reason
		}
		if !quotedName {
			bad := badChars(name, func(c rune) bool { return c != '.' && (c == ' ' || isAtext(c, false)) })
			if bad != "" {
				return "", "The display name contains invalid characters when not quoted: " + bad + "."
			}
		}
		switch {
		case !strings.Contains(rest, ">"):
			return "", "An open angle bracket at the start of the email address has to be followed by a close angle bracket at the end."
		case !strings.HasSuffix(strings.TrimRight(rest, " "), ">"):
			return "", "There can't be anything after the email address."
		}
		return "", "A display name and angle brackets around the email address are not permitted here."
	}
	domain := rest[1:]
	original := local + rest

	unquoted, quoted, reason := unquoteLocalPart(local)
	if reason != "" {
		return "", reason
	}
	if local, reason = checkLocalPart(unquoted, quoted); reason != "" {
		return "", reason
	}
	if quoted {
		return "", "Quoting the part before the @-sign is not allowed here."
	}
	if slices.Contains(caseInsensitiveMailboxes, strings.ToLower(local)) {
		local = strings.ToLower(local)
	}

	if domain == "" {
		return "", "There must be something after the @-sign."
	}
	if strings.HasPrefix(domain, "[") && strings.HasSuffix(domain, "]") {
		return "", "A bracketed IP address after the @-sign is not allowed here."
	}
	if domain, reason = checkDomain(domain); reason != "" {
		return "", reason
	}

	if reason := checkTotalLength(original); reason != "" {
		return "", reason
	}
	return local + "@" + domain, ""
}

// cutUnquoted splits text before the first of specials outside a quoted string.
func cutUnquoted(text, specials string) (string, string, bool) {
	inQuote, escaped := false, false
	for i, c := range text {
		switch {
		case inQuote:
			switch {
			case c == '\\' && !escaped:
				escaped = true
			case c == '"' && !escaped:
				inQuote = false
			default:
				escaped = false
			}
		case c == '"':
			inQuote = true
		case strings.ContainsRune(specials, c):
			return text[:i], text[i:], true
		}
	}
	return text, "", false
}

// unquoteLocalPart removes surrounding quotes and backslash escapes.
func unquoteLocalPart(text string) (string, bool, string) {
	if !strings.HasPrefix(text, `"`) {
		return text, false, ""
	}
	var b strings.Builder
	escaped := false
	body := text[1:]
	for i, c := range body {
		switch {
		case escaped:
			b.WriteRune(c)
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			if extra := body[i+1:]; extra != "" {
				return "", true, "Extra character(s) found after close quote: " + strings.Join(displayEach(extra), ", ")
			}
			return b.String(), true, ""
		default:
			b.WriteRune(c)
		}
	}
	return b.String(), true, ""
}

// checkLocalPart is validate_email_local_part with SMTPUTF8 allowed.
func checkLocalPart(local string, quoted bool) (string, string) {
	if local == "" {
		return "", "There must be something before the @-sign."
	}
	if isDotAtom(local, false) {
		return local, ""
	}
	switch {
	case isDotAtom(local, true):
		if reason := checkUnsafeChars(local, false); reason != "" {
			return "", reason
		}
		return local, ""
	case quoted:
		bad := badChars(local, func(c rune) bool { return c >= 0x20 && c != 0x7f })
		if bad != "" {
			return "", "The email address contains invalid characters in quotes before the @-sign: " + bad + "."
		}
		if reason := checkUnsafeChars(local, true); reason != "" {
			return "", reason
		}
		return local, ""
	}
	if bad := badChars(local, func(c rune) bool { return c == '.' || isAtext(c, true) }); bad != "" {
		return "", "The email address contains invalid characters before the @-sign: " + bad + "."
	}
	if reason := checkDots(local, "An email address cannot start with a %s.", "An email address cannot have a %s immediately before the @-sign.", false); reason != "" {
		return "", reason
	}
	return "", "The email address contains invalid characters before the @-sign."
}

// checkDomain is validate_email_domain_name for the checks that do not need
// IDNA tables. It returns the normalized (lower-cased) domain.
func checkDomain(domain string) (string, string) {
	isHostChar := func(c rune) bool {
		return c >= 0x80 || c == '-' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	if bad := badChars(domain, isHostChar); bad != "" {
		return "", "The part after the @-sign contains invalid characters: " + bad + "."
	}
	if reason := checkUnsafeChars(domain, false); reason != "" {
		return "", reason
	}
	// UTS-46 mapping lower-cases and turns the ideographic / full-width full stops into dots.
	domain = strings.NewReplacer("。", ".", "．", ".", "｡", ".").Replace(strings.ToLower(domain))
	if reason := checkDots(domain, "An email address cannot have a %s immediately after the @-sign.", "An email address cannot end with a %s.", true); reason != "" {
		return "", reason
	}
	labels := strings.Split(domain, ".")
	for _, label := range labels {
		if r := []rune(label); len(r) >= 4 && string(r[2:4]) == "--" && !strings.HasPrefix(label, "xn") {
			return "", "An email address cannot have two letters followed by two dashes immediately after the @-sign or after a period, except Punycode."
		}
	}
	if len(domain) > 253 {
		return "", "The email address is too long after the @-sign " + tooManyCharacters(len(domain)-253) + "."
	}
	for _, label := range labels {
		if len(label) > 63 {
			return "", "After the @-sign, periods cannot be separated by so many characters " + tooManyCharacters(len(label)-63) + "."
		}
	}
	if len(labels) == 1 {
		return "", "The part after the @-sign is not valid. It should have a period."
	}
	// An internationalized TLD would end with a letter once Punycode-encoded.
	if last := domain[len(domain)-1]; last < 0x80 && !('a' <= last && last <= 'z') {
		return "", "The part after the @-sign is not valid. It is not within a valid top-level domain."
	}
	for _, special := range specialUseDomains {
		if domain == special || strings.HasSuffix(domain, "."+special) {
			return "", "The part after the @-sign is a special-use or reserved name that cannot be used with email."
		}
	}
	return domain, ""
}

// checkTotalLength applies the 254-octet limit to the address as given.
func checkTotalLength(addr string) string {
	const limit = 254
	diff := len(addr) - limit
	if diff <= 0 {
		return ""
	}
	chars := utf8.RuneCountInString(addr)
	if chars == len(addr) {
		return "The email address is too long " + tooManyCharacters(diff) + "."
	}
	// Multi-byte characters: the number of characters over is only known as a range.
	maxBytes := 1
	for _, c := range addr {
		maxBytes = max(maxBytes, utf8.RuneLen(c))
	}
	minChars := max(1, diff/maxBytes)
	suffix := ""
	if diff > 1 {
		suffix = "s"
	}
	if minChars == diff {
		return fmt.Sprintf("The email address is too long (%d character%s too many).", diff, suffix)
	}
	return fmt.Sprintf("The email address is too long (%d-%d character%s too many).", minChars, diff, suffix)
}

func tooManyCharacters(diff int) string {
	if diff > 1 {
		return fmt.Sprintf("(%d characters too many)", diff)
	}
	return fmt.Sprintf("(%d character too many)", diff)
}

// isDotAtom matches RFC 5322 dot-atom-text, optionally extended with the
// non-ASCII characters RFC 6531 allows.
func isDotAtom(s string, intl bool) bool {
	for atom := range strings.SplitSeq(s, ".") {
		if atom == "" {
			return false
		}
		for _, c := range atom {
			if !isAtext(c, intl) {
				return false
			}
		}
	}
	return true
}

func isAtext(c rune, intl bool) bool {
	return c < 0x80 && strings.ContainsRune(atext, c) || intl && c >= 0x80
}

// checkDots is email-validator's check_dot_atom; the descriptions take "period" or "hyphen".
func checkDots(label, startDescr, endDescr string, hostname bool) string {
	switch {
	case strings.HasSuffix(label, "."):
		return fmt.Sprintf(endDescr, "period")
	case strings.HasPrefix(label, "."):
		return fmt.Sprintf(startDescr, "period")
	case strings.Contains(label, ".."):
		return "An email address cannot have two periods in a row."
	case !hostname:
		return ""
	case strings.HasSuffix(label, "-"):
		return fmt.Sprintf(endDescr, "hyphen")
	case strings.HasPrefix(label, "-"):
		return fmt.Sprintf(startDescr, "hyphen")
	case strings.Contains(label, ".-") || strings.Contains(label, "-."):
		return "An email address cannot have a period and a hyphen next to each other."
	}
	return ""
}

// checkUnsafeChars rejects characters that are not letters, numbers,
// punctuation or symbols: controls, format characters, line separators,
// spaces (unless allowed), and a combining mark in first position.
func checkUnsafeChars(s string, allowSpace bool) string {
	var bad []rune
	i := 0
	for _, c := range s {
		switch {
		case isVisible(c):
		case unicode.IsMark(c):
			if i == 0 {
				bad = append(bad, c)
			}
		case unicode.Is(unicode.Zs, c):
			if !allowSpace {
				bad = append(bad, c)
			}
		default:
			bad = append(bad, c)
		}
		i++
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	bad = slices.Compact(bad)
	shown := make([]string, len(bad))
	for j, c := range bad {
		shown[j] = displayChar(c)
	}
	return "The email address contains unsafe characters: " + strings.Join(shown, ", ") + "."
}

// isVisible is Unicode general category L, N, P or S.
func isVisible(c rune) bool {
	return unicode.IsLetter(c) || unicode.IsNumber(c) || unicode.IsPunct(c) || unicode.IsSymbol(c)
}

// badChars lists the distinct characters of s failing ok, displayed and
// sorted by their display as email-validator does ("'<', 'x'"); "" if none.
func badChars(s string, ok func(rune) bool) string {
	var shown []string
	for _, c := range s {
		if !ok(c) {
			shown = append(shown, displayChar(c))
		}
	}
	slices.Sort(shown)
	return strings.Join(slices.Compact(shown), ", ")
}

func displayEach(s string) []string {
	var out []string
	for _, c := range s {
		out = append(out, displayChar(c))
	}
	return out
}

// charNames are the Unicode names of the invisible characters people
// actually paste into addresses; others are shown as U+XXXX.
var charNames = map[rune]string{
	' ':      "SPACE",
	'\u00a0': "NO-BREAK SPACE",
	'\u00ad': "SOFT HYPHEN",
	'\u200b': "ZERO WIDTH SPACE",
	'\u200c': "ZERO WIDTH NON-JOINER",
	'\u200d': "ZERO WIDTH JOINER",
	'\u2028': "LINE SEPARATOR",
	'\u2029': "PARAGRAPH SEPARATOR",
	'\u202f': "NARROW NO-BREAK SPACE",
	'\u3000': "IDEOGRAPHIC SPACE",
	'\ufeff': "ZERO WIDTH NO-BREAK SPACE",
}

// displayChar is email-validator's safe_character_display.
func displayChar(c rune) string {
	switch {
	case c == '\\':
		return `"\"`
	case isVisible(c):
		return pyRepr(string(c))
	}
	if name, ok := charNames[c]; ok {
		return name
	}
	if c < 0xffff {
		return fmt.Sprintf("U+%04X", c)
	}
	return fmt.Sprintf("U+%08X", c)
}
