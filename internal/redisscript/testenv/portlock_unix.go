//go:build unix

package testenv

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Ports are reserved across the test processes of one machine, so that two
// suites run side by side never hand out the same port: each process holds
// a lock on byte p of one shared file for every port p it handed out, until
// it exits (the kernel drops a process's record locks then). Without it, a
// port one suite found free could be bound by the other suite's server
// before its own.
var (
	portFileOnce sync.Once
	portFile     *os.File // kept open: closing any descriptor of it would drop every lock
)

// reservePort reports whether port p is now this process's: false when
// another process holds it. Without the shared file every port is taken.
func reservePort(p int) bool {
	portFileOnce.Do(func() {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "sluice-test-ports.lock"), os.O_RDWR|os.O_CREATE, 0o666)
		if err == nil {
			portFile = f
		}
	})
	if portFile == nil {
		return true
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(p), Len: 1}
	return syscall.FcntlFlock(portFile.Fd(), syscall.F_SETLK, &lk) == nil
}
