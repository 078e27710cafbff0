package startup

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/settings"
)

// Healthcheck is a binary's `healthcheck [-url URL]` subcommand, for
// container health checks in images without curl: it fails unless the URL
// (defaultURL when not given) answers 200 within the timeout.
func Healthcheck(ctx context.Context, program, defaultURL string, args []string, output io.Writer) error {
	fs := flag.NewFlagSet(program+" healthcheck", flag.ContinueOnError)
	fs.SetOutput(output)
	url := fs.String("url", defaultURL, "`URL` to check")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	insecure := fs.Bool("insecure", false, "do not verify the certificate of an https URL (the check is of the process, on its own host)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return settings.UsageError{Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return settings.UsageError{Err: fmt.Errorf("healthcheck url: %w", err)}
	}
	c := http.DefaultClient
	if *insecure {
		c = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", *url, resp.Status)
	}
	return nil
}
