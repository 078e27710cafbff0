// Package web holds the console's HTML templates and static assets,
// embedded so that the binary serves the exact files it was built with.
package web

import (
	"embed"
	"io/fs"
)

//go:embed templates/*.html
var templates embed.FS

//go:embed static
var static embed.FS

// Templates holds the html/template files, at the root ("layout.html").
var Templates fs.FS = mustSub(templates, "templates")

// Static holds the stylesheet, script and icons, at the root ("app.css").
var Static fs.FS = mustSub(static, "static")

func mustSub(f embed.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic("web: embedded directory " + dir + " is missing: " + err.Error())
	}
	return sub
}
