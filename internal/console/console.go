// Package console is weir's web console: one page of plain HTML, CSS and JavaScript, embedded in the
// binary and served at / on the node's HTTP port (docs/http.md, "Web console"). The page has no
// build step and loads nothing from elsewhere; everything it shows or changes goes through the HTTP
// API of internal/httpapi, which it polls every few seconds.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the console's files to GET and HEAD: index.html at /, and console.js and
// console.css beside it.
// They may be cached for a short while only, so that a node upgraded in place serves its own page.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err)
	}
	fsrv := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the console is read with GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		fsrv.ServeHTTP(w, r)
	})
}
