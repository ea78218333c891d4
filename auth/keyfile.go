package auth

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// generatedKeyLen is the size of keys LoadOrCreateKey makes.
const generatedKeyLen = 32

// DecodeKey decodes a signing key written as hex (surrounding white space
// ignored) and checks it is at least MinKeyLen bytes, i.e. 64 hex digits.
// Key files use this format, and LECTERN_JWT_KEY can use it too; generate
// one with `openssl rand -hex 32`.
func DecodeKey(s string) ([]byte, error) {
	key, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("auth: signing key is not hex: %w", err)
	}
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("auth: signing key is %d bytes, need at least %d (%d hex digits)", len(key), MinKeyLen, 2*MinKeyLen)
	}
	return key, nil
}

// LoadOrCreateKey returns the signing key stored at path as hex text (see
// DecodeKey). If the file does not exist it creates one holding 32 random
// bytes as 64 hex digits and a newline, with mode 0600, creating missing
// parent directories with mode 0700. An existing file that does not decode
// is an error and is left untouched, since replacing it would silently log
// everyone out.
//
// Creation is atomic: the key is written to a temporary file and hard-linked
// into place, so concurrent callers all end up with the same key and no one
// reads a half-written file.
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := readKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key, err = CreateKey(path)
	if errors.Is(err, fs.ErrExist) {
		// Another writer won: its key is the one to use.
		return readKeyFile(path)
	}
	return key, err
}

// CreateKey writes a new key to path as LoadOrCreateKey does, but fails
// with an error matching fs.ErrExist when path exists: for a key that must
// be new (the master key a rotation goes to).
func CreateKey(path string) ([]byte, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("auth: creating key directory: %w", err)
	}
	raw := make([]byte, generatedKeyLen)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("auth: reading random key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".keytmp-*") // CreateTemp uses mode 0600
	if err != nil {
		return nil, fmt.Errorf("auth: creating key file: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("auth: writing key file: %w", err)
	}
	// Link, unlike Rename, fails if path appeared meanwhile.
	if err := os.Link(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("auth: installing key file: %w", err)
	}
	return raw, nil
}

// LoadKey returns the key stored at path as LoadOrCreateKey does, but a
// missing file is an error: for a key that must already exist (the master
// key being rotated away from).
func LoadKey(path string) ([]byte, error) {
	key, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("auth: no key file at %s", path)
	}
	return key, err
}

func readKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("auth: reading key file: %w", err)
	}
	key, err := DecodeKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("auth: key file %s: %w", path, err)
	}
	return key, nil
}
