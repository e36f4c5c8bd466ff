package weft

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain makes sure the tests run with GODEBUG=cgocheck=2 (full checking of the cgo
// pointer-passing rules): if it is not set, the test binary re-runs itself with it.
func TestMain(m *testing.M) {
	if !strings.Contains(os.Getenv("GODEBUG"), "cgocheck=2") {
		godebug := "cgocheck=2"
		if old := os.Getenv("GODEBUG"); old != "" {
			godebug = old + ",cgocheck=2"
		}
		cmd := exec.Command(os.Args[0], os.Args[1:]...)
		cmd.Env = append(os.Environ(), "GODEBUG="+godebug)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				os.Exit(ee.ExitCode())
			}
			os.Stderr.WriteString("weft test: could not re-run with GODEBUG=cgocheck=2: " + err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
