//go:build weft_buildtree

package weft

// With -tags weft_buildtree, cgo takes weft.h from this checkout's capi/include and
// libweft.so from its build/lib (scripts/build), with an rpath to it, so the tests run from a
// checkout without installing weft (bindings/run-native-tests uses it). Without the tag,
// cgo_pkgconfig.go asks pkg-config.

// #cgo CFLAGS: -I${SRCDIR}/../../capi/include
// #cgo LDFLAGS: -L${SRCDIR}/../../build/lib -Wl,-rpath,${SRCDIR}/../../build/lib -lweft
import "C"
