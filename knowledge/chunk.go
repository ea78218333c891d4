// Package knowledge holds the pieces of knowledge-document search that need
// no database: chunking, embedders (the built-in offline one and an
// OpenAI-compatible client), cosine search and the lexical reranker.
package knowledge

import (
	"strings"
	"unicode/utf8"
)

// Default chunking: about 800 characters a chunk, 100 of them shared with
// the previous chunk, cut at word boundaries.
const (
	ChunkSize    = 800
	ChunkOverlap = 100
)

// Chunk splits text into chunks of at most size characters (runes), cut
// between words, each starting with up to overlap characters of the end of
// the previous one. Whitespace runs become one space. A word longer than
// size is cut into pieces of size. Blank text has no chunks.
func Chunk(text string, size, overlap int) []string {
	if size < 1 {
		size = ChunkSize
	}
	if overlap < 0 || overlap >= size {
		overlap = 0
	}
	var words []string
	for _, w := range strings.Fields(text) {
		for utf8.RuneCountInString(w) > size {
			cut := byteIndexOfRune(w, size)
			words = append(words, w[:cut])
			w = w[cut:]
		}
		words = append(words, w)
	}
	var out []string
	start := 0
	for start < len(words) {
		n, end := 0, start
		for end < len(words) {
			l := utf8.RuneCountInString(words[end])
			if end > start {
				l++ // the space before it
			}
			if end > start && n+l > size {
				break
			}
			n += l
			end++
		}
		out = append(out, strings.Join(words[start:end], " "))
		if end == len(words) {
			break
		}
		// Step back over whole words while they fit in the overlap, but
		// always move forward by at least one word.
		next, kept := end, 0
		for next > start+1 {
			l := utf8.RuneCountInString(words[next-1]) + 1
			if kept+l > overlap {
				break
			}
			kept += l
			next--
		}
		start = next
	}
	return out
}

func byteIndexOfRune(s string, n int) int {
	i := 0
	for pos := range s {
		if i == n {
			return pos
		}
		i++
	}
	return len(s)
}
