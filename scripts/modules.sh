# shellcheck shell=bash
# Sourced by the scripts that build, vet and test: sets module_patterns to one
# ./dir/... pattern per module of go.work (the root module, the nested modules
# a service may require on their own, and bench). A pattern like ./... covers
# only the module of the current directory, so every script names them all.
# Run from the repository root.
export GOWORK="$PWD/go.work"
module_patterns=()
while IFS= read -r dir; do
	rel="${dir#"$PWD"}"
	module_patterns+=(".${rel}/...")
done < <(go list -m -f '{{.Dir}}')
[ ${#module_patterns[@]} -gt 1 ] || {
	echo "go.work lists no nested modules" >&2
	exit 1
}
