// Package web is the browser storefront, embedded in the binary and served by the app at / so
// that it works offline, with no CDN and no build step.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// FS returns the storefront's files: index.html at the root, assets beside it.
func FS() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		// fs.Sub fails only for an invalid path, and "static" is a constant.
		panic(err)
	}
	return sub
}
