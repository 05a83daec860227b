// Package token finds the token an example program connects with: the
// -token flag, else $BRAIN_TOKEN, else the first token of the wanted side in
// <data>/tokens.json (what brain serve created on its first start).
package token

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Find returns flagValue, $BRAIN_TOKEN, or the first token of side in
// dataDir's tokens.json, in that order.
func Find(flagValue, dataDir, side string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if t := os.Getenv("BRAIN_TOKEN"); t != "" {
		return t, nil
	}
	path := filepath.Join(dataDir, "tokens.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("no -token and no $BRAIN_TOKEN, and %w: run this from the directory where brain serve made %s, or give -data DIR or -token", err, dataDir)
	}
	var f struct {
		Tokens []struct{ Token, Side string }
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, t := range f.Tokens {
		if t.Side == side {
			return t.Token, nil
		}
	}
	return "", fmt.Errorf("%s has no token of side %q", path, side)
}
