//go:build !dev

package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestProductionBuildRefusesDev: a build without the dev tag answers -dev
// with a usage error that says how to run it.
func TestProductionBuildRefusesDev(t *testing.T) {
	var stderr strings.Builder
	err := dispatch(context.Background(), env{args: []string{"-dev"}, getenv: noEnv, stdin: strings.NewReader(""),
		stdout: io.Discard, stderr: &stderr})
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), devCommand) {
		t.Fatalf("-dev in a production build: %v, want a usage error naming %q", err, devCommand)
	}
}
