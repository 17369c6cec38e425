package client

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedClientIsFresh generates the client into a temporary directory, with the
// generator pinned in tools.mod and the go:generate line's arguments, and holds the checked-in
// client.gen.go to it: a change of the contract, of oapi-codegen.yaml or overlay.yaml, or of
// the generator's version fails here until `go generate ./api/client` is run. The first run
// builds the generator (slow); it needs the module cache, not the network.
func TestGeneratedClientIsFresh(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to run the generator: %v", err)
	}
	out := filepath.Join(t.TempDir(), "client.gen.go")
	cmd := exec.Command(goCmd, "tool", "-modfile=../../tools.mod", "oapi-codegen",
		"-config", "oapi-codegen.yaml", "-o", out, "../openapi.yaml")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("client.gen.go is not what oapi-codegen makes of api/openapi.yaml: run go generate ./api/client (first difference at line %d)", firstDiffLine(got, want))
	}
}

// firstDiffLine returns the 1-based line where a and b first differ.
func firstDiffLine(a, b []byte) int {
	line := 1
	for i := 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
		if a[i] == '\n' {
			line++
		}
	}
	return line
}
