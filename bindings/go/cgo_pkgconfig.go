//go:build !weft_buildtree

package weft

// Where cgo finds weft.h and libweft.so when the package is used as a dependency: from
// pkg-config's weft.pc, as installed by weft's Debian package or `cmake --install` (for a
// custom prefix P, PKG_CONFIG_PATH=P/lib/pkgconfig and, at run time, LD_LIBRARY_PATH=P/lib).
// Building inside a weft checkout without installing it: -tags weft_buildtree
// (cgo_buildtree.go).

// #cgo pkg-config: weft
import "C"
