package api

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/go-chi/chi/v5"
)

// appFiles are the practice page: plain HTML, CSS and JavaScript, embedded
// so that the page works offline and needs no build step.
//
//go:embed app
var appFiles embed.FS

// appAsset is one file of the page, with its content type and ETag.
type appAsset struct {
	data        []byte
	contentType string
	etag        string
}

// appAssets are read once: the files never change in a running binary.
var appAssets = func() map[string]appAsset {
	out := map[string]appAsset{}
	err := fs.WalkDir(appFiles, "app", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := appFiles.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		ctype := mime.TypeByExtension(path.Ext(p))
		if path.Ext(p) == ".html" {
			ctype = "text/html; charset=utf-8"
		}
		out[p[len("app/"):]] = appAsset{data: data, contentType: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("api: the embedded practice page: " + err.Error())
	}
	return out
}()

// appPolicy keeps the page to its own origin: its scripts, styles and the
// API it calls.
const appPolicy = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// appRoutes serves the practice page at / and /app, its files under /app/.
// The page is not part of the API: the OpenAPI document leaves it out.
func appRoutes(r chi.Router) {
	page := func(w http.ResponseWriter, req *http.Request) { serveAppAsset(w, req, "index.html") }
	r.Get("/", page)
	r.Get("/app", page)
	r.Get("/app/*", func(w http.ResponseWriter, req *http.Request) {
		name := chi.URLParam(req, "*")
		if name == "" {
			name = "index.html"
		}
		serveAppAsset(w, req, name)
	})
}

func serveAppAsset(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := appAssets[name]
	if !ok {
		writeDetail(w, http.StatusNotFound, "Not Found")
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache") // revalidated (ETag), so that a new binary's page is seen
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", appPolicy)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.data))
}
