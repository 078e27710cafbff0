//go:build unix

package testenv

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// A port one process reserved is refused to another: the child process
// below tries to reserve the port this one holds.
func TestReservePortAcrossProcesses(t *testing.T) {
	if p := os.Getenv("SLUICE_TESTENV_TRY_PORT"); p != "" {
		n, _ := strconv.Atoi(p)
		if reservePort(n) {
			os.Exit(3)
		}
		os.Exit(4)
	}
	p := FreePort(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestReservePortAcrossProcesses$")
	cmd.Env = append(os.Environ(), "SLUICE_TESTENV_TRY_PORT="+strconv.Itoa(p))
	err := cmd.Run()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	switch code {
	case 4:
	case 3:
		t.Fatalf("another process reserved port %d, which this one holds", p)
	default:
		t.Fatalf("child: %v", err)
	}
}
