package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/limitsfile"
	"github.com/sluicehq/sluice/internal/limitsfile/envoyconf"
	"github.com/sluicehq/sluice/internal/redisscript/names"
	"github.com/sluicehq/sluice/internal/settings"
)

// importEnvoy converts envoy ratelimit configuration into a limits file.
// It needs no server.
func (c *command) importEnvoy(args []string) error {
	var files []string
	app, out := "gateway", ""
	var strict bool
	s := c.flags("import-envoy -f CONFIG.yaml[,MORE.yaml] [-app NAME] [-o FILE] [-strict]", nil)
	s.List(&files, "f", "", `envoy ratelimit configuration files, comma-separated ("-" reads standard input)`)
	s.String(&app, "app", "", "the Sluice app of the gateway: it owns the buckets and its app token is what the gateway's decision calls carry")
	s.String(&out, "o", "", "file to write; empty means standard output")
	s.Bool(&strict, "strict", "", "exit 1 when a descriptor is unmapped or approximated (reported on standard error either way)")
	if err := parse(s, args); err != nil {
		return err
	}
	if len(files) == 0 {
		return settings.Usagef("-f CONFIG.yaml is required")
	}
	if !names.Valid(app) {
		return settings.Usagef("-app %q: %s", app, names.Problem(app))
	}
	var configs []envoyconf.Config
	for _, name := range files {
		var r io.Reader = c.stdin
		if name != "-" {
			fh, err := os.Open(name)
			if err != nil {
				return err
			}
			defer fh.Close()
			r = fh
		}
		cs, err := envoyconf.Decode(r)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		configs = append(configs, cs...)
	}
	f, findings := envoyconf.Convert(configs, app)
	if _, err := limitsfile.Check(f, nil); err != nil {
		return fmt.Errorf("the converted file does not check (a defect of the converter): %w", err)
	}
	serious := 0
	for _, fd := range findings {
		fmt.Fprintf(c.stderr, "%s\n", fd)
		if fd.Severity != envoyconf.Ignored {
			serious++
		}
	}
	fmt.Fprintf(c.stderr, "imported %d domain(s): %d bucket(s) and mapping(s); %d descriptor(s) unmapped or approximated, %d setting(s) ignored\n",
		len(configs), len(f.Mappings), serious, len(findings)-serious)
	header := "Sluice limits, converted from envoy ratelimit configuration (" + strings.Join(files, ", ") + ").\n" +
		"Review, then: sluice-limits diff -f FILE; sluice-limits apply -f FILE."
	w := c.stdout
	if out != "" {
		fh, err := os.Create(out)
		if err != nil {
			return err
		}
		defer fh.Close()
		w = fh
	}
	if err := limitsfile.Encode(w, f, header); err != nil {
		return err
	}
	if fh, ok := w.(*os.File); ok && out != "" {
		if err := fh.Close(); err != nil {
			return err
		}
	}
	if strict && serious > 0 {
		return exitCode(exitError)
	}
	return nil
}
