package main

import (
	"io"

	"github.com/sluicehq/sluice/internal/settings"
)

// exitCode is the exit code main gives err.
func exitCode(err error) int { return settings.ExitCode("sluice-admin", err, io.Discard) }
