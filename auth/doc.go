// Package auth holds Lectern's security primitives: password hashing
// (argon2id), signed access and purpose-bound tokens (HS256 JWTs), opaque
// secrets (refresh tokens, sign-up codes) and the signing-key file.
//
// It has no HTTP handlers and no database access; callers store what these
// functions return (PHC strings, secret hashes) and hand it back to verify.
package auth
