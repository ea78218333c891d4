package knowledge

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// Embedder turns texts into vectors, one per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// OfflineDims is the size of the offline embedder's vectors.
const OfflineDims = 256

// Offline is the built-in embedder: a hashed bag of words (lower-cased
// letter-and-digit tokens, FNV-1a into Dims buckets), L2-normalised. It needs
// no key and no network, so search works out of the box; it matches words,
// not meanings.
type Offline struct{ Dims int }

// NewOffline returns the offline embedder with OfflineDims dimensions.
func NewOffline() Offline { return Offline{Dims: OfflineDims} }

// Embed implements Embedder; it never fails.
func (o Offline) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = o.vector(t)
	}
	return out, nil
}

func (o Offline) vector(text string) []float32 {
	dims := o.Dims
	if dims < 1 {
		dims = OfflineDims
	}
	v := make([]float32, dims)
	for _, tok := range Tokens(text) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(tok))
		v[h.Sum32()%uint32(dims)]++
	}
	normalise(v)
	return v
}

// Tokens are text's lower-cased runs of letters and digits.
func Tokens(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

func normalise(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	n := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= n
	}
}
