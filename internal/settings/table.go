package settings

import "strings"

// Table renders settings as the README's Markdown table, so that a test
// can hold the README to what a binary binds.
func Table(settings []Setting) string {
	var b strings.Builder
	b.WriteString("| Variable | Flag | Default | Meaning |\n|---|---|---|---|\n")
	code := func(s string) string {
		if s == "" {
			return ""
		}
		return "`" + s + "`"
	}
	for _, s := range settings {
		def := code(s.Default)
		if s.Secret {
			def = "secret"
		}
		flagName := ""
		if s.Flag != "" {
			flagName = "-" + s.Flag
		}
		b.WriteString("| " + code(s.Env) + " | " + code(flagName) + " | " + def + " | " +
			strings.ReplaceAll(s.Usage, "|", "\\|") + " |\n")
	}
	return b.String()
}
