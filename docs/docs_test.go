// Package docs holds no code: its test keeps README.md and docs/*.md honest against the tree.
// Every relative link resolves (the file exists, and an #anchor names a heading of the target by
// GitHub's rules), every `make <target>` named exists in the Makefile, the settings table of
// docs/configuration.md lists exactly the SECKILL_* settings internal/config reads, and the README
// stays a front page that links every page of docs/. A SECKILL_* variable named in prose exists
// in the tree. The error
// table of docs/api.md is checked against the code by internal/httpapi (TestAPIDocErrorTable).
package docs

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/config"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// pages returns README.md, every docs/*.md and the index of the kept runs, as paths from the
// repository root.
func pages(tb testing.TB) []string {
	tb.Helper()
	md, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		tb.Fatal(err)
	}
	out := []string{"README.md", "loadtest/results/README.md"}
	for _, p := range md {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// page is a Markdown file split in what its links and code can be read from.
type page struct {
	prose []line // lines outside fenced code blocks
	code  []line // lines inside them
}

type line struct {
	n    int
	text string
}

func readPage(tb testing.TB, rel string) page {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		tb.Fatal(err)
	}
	var p page
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		t := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(t), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			p.code = append(p.code, line{n, t})
		} else {
			p.prose = append(p.prose, line{n, t})
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return p
}

var (
	heading    = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
	imgSrc     = regexp.MustCompile(`<img[^>]*\ssrc="([^"]+)"`)
	codeSpan   = regexp.MustCompile("`([^`]+)`")
	settingRow = regexp.MustCompile(`^\|\s*([^|]*SECKILL_[^|]*)\|`)
	settingVar = regexp.MustCompile(`SECKILL_[A-Z0-9_]+`)
	envInUsage = regexp.MustCompile(`\(env (SECKILL_[A-Z0-9_]+)\)`)
	namedVar   = regexp.MustCompile(`SECKILL_[A-Z0-9_]*[A-Z0-9]\b`)
	makeTarget = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:([^=]|$)`)
)

// anchors returns the anchors GitHub makes of a page's headings: the text without its markup,
// lower case, letters, digits, '-' and '_' kept, spaces as '-', everything else dropped; a
// repeated anchor gets -1, -2….
func anchors(p page) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range p.prose {
		m := heading.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		a := slug(m[1])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = a + "-" + itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

func slug(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

// TestLinksResolve: every relative link and image of README.md and docs/*.md names a file or
// directory that exists, and an #anchor into a Markdown page names one of its headings.
func TestLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := cache[rel]; ok {
			return a
		}
		a := anchors(readPage(t, rel))
		cache[rel] = a
		return a
	}
	checked := 0
	for _, rel := range pages(t) {
		p := readPage(t, rel)
		for _, l := range p.prose {
			var targets []string
			for _, m := range mdLink.FindAllStringSubmatch(l.text, -1) {
				targets = append(targets, m[2])
			}
			for _, m := range imgSrc.FindAllStringSubmatch(l.text, -1) {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				dest := rel
				if file != "" {
					dest = filepath.ToSlash(filepath.Join(filepath.Dir(rel), file))
					if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", rel, l.n, target, dest)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if !anchorsOf(dest)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", rel, l.n, target, dest, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links found: is the link pattern still right?", checked)
	}
}

// makeTargets returns the targets the Makefile defines.
func makeTargets(tb testing.TB) map[string]bool {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "#") {
			continue
		}
		if m := makeTarget.FindStringSubmatch(l); m != nil {
			for _, t := range strings.Fields(m[1]) {
				out[t] = true
			}
		}
	}
	return out
}

// makeCalls returns the targets a piece of shell names: the first word after each `make` in
// command position that is neither a flag nor a VAR=value.
func makeCalls(s string) []string {
	var out []string
	for _, cmd := range regexp.MustCompile(`&&|\|\||;|\|`).Split(s, -1) {
		f := strings.Fields(cmd)
		if len(f) > 0 && f[0] == "$" {
			f = f[1:]
		}
		if len(f) == 0 || f[0] != "make" {
			continue
		}
		for _, w := range f[1:] {
			if strings.HasPrefix(w, "#") {
				break
			}
			if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
				continue
			}
			out = append(out, strings.Trim(w, ",.:)"))
			break
		}
	}
	return out
}

// TestMakeTargetsExist: every `make <target>` that README.md and docs/*.md name, in a code span
// or a code block, is a target of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	targets := makeTargets(t)
	if !targets["up"] || !targets["test"] {
		t.Fatalf("Makefile targets %v: up and test missing, is the pattern still right?", targets)
	}
	named := 0
	check := func(rel string, n int, s string) {
		for _, name := range makeCalls(s) {
			named++
			if !targets[name] {
				t.Errorf("%s:%d: `make %s`: the Makefile has no target %q", rel, n, name, name)
			}
		}
	}
	for _, rel := range pages(t) {
		p := readPage(t, rel)
		for _, l := range p.code {
			check(rel, l.n, l.text)
		}
		for _, l := range p.prose {
			for _, m := range codeSpan.FindAllStringSubmatch(l.text, -1) {
				check(rel, l.n, m[1])
			}
		}
	}
	if named < 20 {
		t.Errorf("only %d make targets named: is the pattern still right?", named)
	}
}

// configSettings returns every SECKILL_* variable internal/config reads, from its -h text (each
// flag's usage ends with "(env SECKILL_…)").
func configSettings(tb testing.TB) []string {
	tb.Helper()
	var usage bytes.Buffer
	_, err := config.Load("seckill", []string{"-h"}, func(string) string { return "" }, &usage)
	if !errors.Is(err, flag.ErrHelp) {
		tb.Fatalf("config.Load -h: %v, want flag.ErrHelp", err)
	}
	var out []string
	for _, m := range envInUsage.FindAllStringSubmatch(usage.String(), -1) {
		out = append(out, m[1])
	}
	if len(out) < 20 {
		tb.Fatalf("only %d settings in config's -h text: is the pattern still right?\n%s", len(out), usage.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestConfigurationTable: the settings table of docs/configuration.md names exactly the settings
// internal/config reads, no more, no fewer.
func TestConfigurationTable(t *testing.T) {
	var documented []string
	for _, l := range readPage(t, "docs/configuration.md").prose {
		if m := settingRow.FindStringSubmatch(l.text); m != nil {
			documented = append(documented, settingVar.FindAllString(m[1], -1)...)
		}
	}
	slices.Sort(documented)
	documented = slices.Compact(documented)
	if diff := cmp.Diff(configSettings(t), documented); diff != "" {
		t.Errorf("settings (-internal/config reads +docs/configuration.md documents):\n%s", diff)
	}
}

// TestREADMEIsAFrontPage: README.md stays a front page (at most 400 lines) and its index links
// every page of docs/, so that a newcomer finds each topic from it.
func TestREADMEIsAFrontPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > 400 {
		t.Errorf("README.md has %d lines, want at most 400: move the topic to docs/", n)
	}
	for _, rel := range pages(t) {
		if strings.HasPrefix(rel, "docs/") && !bytes.Contains(b, []byte("]("+rel+")")) {
			t.Errorf("README.md does not link %s", rel)
		}
	}
}

// TestNamedVariablesExist: every SECKILL_* variable the pages name is read by internal/config or
// named somewhere in the tree outside the docs (a script, the Makefile, a compose file, a test),
// so that a renamed or removed variable does not live on in prose.
func TestNamedVariablesExist(t *testing.T) {
	known := map[string]bool{}
	for _, v := range configSettings(t) {
		known[v] = true
	}
	named := map[string]string{} // variable → first page:line naming it
	for _, rel := range pages(t) {
		p := readPage(t, rel)
		for _, l := range append(p.prose, p.code...) {
			for _, v := range namedVar.FindAllString(l.text, -1) {
				if _, ok := named[v]; !ok && !known[v] {
					named[v] = rel + ":" + itoa(l.n)
				}
			}
		}
	}
	if len(named) == 0 {
		return
	}
	skip := map[string]bool{".git": true, ".run": true, "bin": true, "results": true, "node_modules": true}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skip[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") || strings.HasSuffix(path, ".png") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for v := range named {
			if bytes.Contains(b, []byte(v)) {
				delete(named, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for v, where := range named {
		t.Errorf("%s: %s is neither a setting of internal/config nor named anywhere in the tree", where, v)
	}
}
