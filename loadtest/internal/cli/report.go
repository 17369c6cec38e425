package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Text is one rendering of a report: the extension of its file (".md", ".html") and its body.
type Text struct {
	Ext, Body string
}

// WriteReport writes dir/base<ext> for each text and dir/base.json (v, indented), creating dir,
// and returns their paths: the texts' in order, then the JSON's.
func WriteReport(dir, base string, v any, texts ...Text) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	texts = append(texts, Text{".json", string(js) + "\n"})
	names := make([]string, 0, len(texts))
	for _, t := range texts {
		name := filepath.Join(dir, base+t.Ext)
		if err := os.WriteFile(name, []byte(t.Body), 0o644); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// GitCommit names the commit a run measured, "+ uncommitted changes" when the tree differs, or
// "unknown" outside a git checkout.
func GitCommit(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	head, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := string(bytes.TrimSpace(head))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		commit += " + uncommitted changes"
	}
	return commit
}
