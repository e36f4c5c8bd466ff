// The module's path is where `go get` finds it: the weft repository's bindings/go folder.
// Versions are tags named bindings/go/vX.Y.Z (Go's rule for a module in a subfolder). The
// package inside is named weft: import it as weft "github.com/weft-dev/weft/bindings/go".
module github.com/weft-dev/weft/bindings/go

go 1.19
