package host

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/tetratelabs/wazero"
)

// The compilation cache is untrusted storage. wazero's own directory cache
// loads whatever file sits under a module's key, without checking it (a
// flipped byte breaks the module, a forged function count exhausts memory,
// another module's entry runs as this one). So wazero never reads the
// cache directory: it reads a private staging directory the host makes
// per process, and the host copies an entry there only after checking its
// MAC — HMAC-SHA256 under a key kept in the cache directory (mode 0600),
// over the payload identity the entry was compiled from, brain's cache
// binding (format and instrumentation versions, wazero's version, Go's
// version, the platform) and wazero's bytes. A bad entry is deleted and
// the payload recompiled, with a warning; it is never fatal.
//
// Layout of Options.CacheDir:
//
//	key             32 random bytes, mode 0600
//	entries/<hex>   one sealed entry per payload identity (see sealEntry)
const (
	cacheKeyFile    = "key"
	cacheEntriesDir = "entries"
	// cacheFormat names the layout of a sealed entry; bump it when it changes.
	cacheFormat = "brain-cache/1"
	// instrumentVersion names the transformation the host applies to a
	// payload before compiling it (instrument.go). Entries of another
	// version are stale.
	instrumentVersion = 3
	// maxEntryBytes bounds a cache entry read from disk.
	maxEntryBytes = 1 << 30
)

// entryMagic starts every sealed entry.
var entryMagic = []byte("BRAINCC\x01")

// codeCache is the verified compilation cache of one host.
type codeCache struct {
	log     *slog.Logger
	entries string // <CacheDir>/entries
	key     []byte
	stage   string // private directory wazero's cache reads and writes
	wazDir  string // stage/wazero-<version>-<arch>-<os>, made by wazero
	binding string
	wcache  wazero.CompilationCache

	mu sync.Mutex // serialises compiles: the staging directory holds one module's entry at a time
}

// openCache checks that dir is private to this user (creating it if
// missing), reads or makes its key, and makes the staging directory.
func openCache(dir string, log *slog.Logger) (*codeCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	if err := checkPrivateDir(dir); err != nil {
		return nil, err
	}
	entries := filepath.Join(dir, cacheEntriesDir)
	if err := os.MkdirAll(entries, 0o700); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	if err := checkPrivateDir(entries); err != nil {
		return nil, err
	}
	key, err := cacheKey(filepath.Join(dir, cacheKeyFile))
	if err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp("", "brain-wazero-stage-")
	if err != nil {
		return nil, fmt.Errorf("cache staging dir: %w", err)
	}
	wc, err := wazero.NewCompilationCacheWithDir(stage)
	if err != nil {
		_ = os.RemoveAll(stage)
		return nil, fmt.Errorf("cache staging dir: %w", err)
	}
	// wazero names its directory after the version it was built as: that
	// name is part of what an entry is bound to.
	des, err := os.ReadDir(stage)
	if err != nil || len(des) != 1 || !des[0].IsDir() || !strings.HasPrefix(des[0].Name(), "wazero-") {
		_ = os.RemoveAll(stage)
		return nil, fmt.Errorf("cache staging dir: unexpected layout from wazero (%v)", err)
	}
	c := &codeCache{log: log, entries: entries, key: key, stage: stage, wcache: wc,
		wazDir:  filepath.Join(stage, des[0].Name()),
		binding: fmt.Sprintf("%s instrument/%d %s %s", cacheFormat, instrumentVersion, des[0].Name(), runtime.Version())}
	return c, nil
}

// checkPrivateDir refuses a directory that is not a directory, is writable
// by group or others, or belongs to another user: compiled code in it runs
// as trusted.
func checkPrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("cache dir %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("cache dir %s is writable by group or others (mode %v): compiled code runs as trusted, so the host refuses it; run chmod go-w on it or choose another directory", dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("cache dir %s belongs to user %d, not to this user (%d): the host refuses it", dir, st.Uid, os.Getuid())
	}
	return nil
}

// cacheKey reads the MAC key at path, or makes one (mode 0600). A key
// others can read or write, or of the wrong size, is refused.
func cacheKey(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		key := make([]byte, sha256.Size)
		_, _ = rand.Read(key)
		_, werr := f.Write(key)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path)
			return nil, fmt.Errorf("cache key: %w", werr)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("cache key: %w", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("cache key: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("cache key %s must be a regular file only its owner can read and write (it is %v): the host refuses it", path, fi.Mode())
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cache key: %w", err)
	}
	if len(key) != sha256.Size {
		return nil, fmt.Errorf("cache key %s has %d bytes, want %d: delete it to start a new cache", path, len(key), sha256.Size)
	}
	return key, nil
}

// close removes the staging directory.
func (c *codeCache) close(ctx context.Context) {
	_ = c.wcache.Close(ctx)
	_ = os.RemoveAll(c.stage)
}

// entryPath is where the entry of a payload identity lives.
func (c *codeCache) entryPath(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return filepath.Join(c.entries, hex.EncodeToString(sum[:]))
}

// compile compiles binary, whose identity the caller verified, loading the
// compiled code from a verified entry when there is one and sealing what
// wazero compiled when there is not.
func (c *codeCache) compile(ctx context.Context, rt wazero.Runtime, identity string, binary []byte) (wazero.CompiledModule, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	staged := c.stageEntry(identity)
	cm, err := rt.CompileModule(ctx, binary)
	if err != nil && staged != "" {
		// A verified entry wazero cannot load: this build wrote it, so
		// this should not happen; drop it and compile afresh.
		c.log.Warn("dropping a compilation cache entry wazero could not load", slog.String("payload", identity), slog.String("error", trapMessage(err)))
		_ = os.Remove(c.entryPath(identity))
		c.clearStage()
		staged = ""
		cm, err = rt.CompileModule(ctx, binary)
	}
	if err == nil {
		c.collect(identity, staged)
	}
	c.clearStage()
	return cm, err
}

// stageEntry verifies the entry of identity and copies wazero's part into
// the staging directory. It returns the staged file's name, or "" when
// there is no usable entry (a bad one is deleted, with a warning).
func (c *codeCache) stageEntry(identity string) string {
	path := c.entryPath(identity)
	e, err := c.readEntry(path, identity)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		level := slog.LevelWarn
		if errors.Is(err, errStaleEntry) {
			level = slog.LevelInfo
		}
		c.log.Log(context.Background(), level, "dropping a compilation cache entry; the payload is recompiled",
			slog.String("payload", identity), slog.String("entry", path), slog.String("reason", err.Error()))
		_ = os.Remove(path)
		return ""
	}
	if err := os.WriteFile(filepath.Join(c.wazDir, e.wazeroKey), e.code, 0o600); err != nil {
		c.log.Warn("cannot stage a compilation cache entry", slog.String("payload", identity), slog.String("error", err.Error()))
		return ""
	}
	return e.wazeroKey
}

// readEntry reads and verifies the entry at path for identity.
func (c *codeCache) readEntry(path, identity string) (cacheEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return cacheEntry{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return cacheEntry{}, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxEntryBytes {
		return cacheEntry{}, fmt.Errorf("not a regular file of at most %d bytes (%v, %d bytes)", maxEntryBytes, fi.Mode(), fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEntryBytes+1))
	if err != nil {
		return cacheEntry{}, err
	}
	return openEntry(c.key, b, c.binding, identity)
}

// collect seals what wazero wrote into the staging directory (a module it
// compiled, not the entry staged for it) as the entry of identity.
func (c *codeCache) collect(identity, staged string) {
	des, err := os.ReadDir(c.wazDir)
	if err != nil {
		return
	}
	for _, d := range des {
		name := d.Name()
		if name == staged || !isWazeroKey(name) {
			continue
		}
		code, err := os.ReadFile(filepath.Join(c.wazDir, name))
		if err != nil {
			continue
		}
		sealed := sealEntry(c.key, cacheEntry{binding: c.binding, identity: identity, wazeroKey: name, code: code})
		if err := writeAtomic(c.entryPath(identity), sealed); err != nil {
			c.log.Warn("cannot write a compilation cache entry", slog.String("payload", identity), slog.String("error", err.Error()))
		}
		return
	}
}

// clearStage empties the staging directory: wazero holds what it loaded.
func (c *codeCache) clearStage() {
	des, _ := os.ReadDir(c.wazDir)
	for _, d := range des {
		_ = os.Remove(filepath.Join(c.wazDir, d.Name()))
	}
}

func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".entry-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// cacheEntry is what a sealed entry holds.
type cacheEntry struct {
	binding   string // the cache binding of the build that wrote it
	identity  string // the payload identity it was compiled from
	wazeroKey string // wazero's file name for it: 64 hex digits
	code      []byte // wazero's serialised compiled module
}

// errStaleEntry marks an authentic entry written by another build.
var errStaleEntry = errors.New("stale entry")

// sealEntry encodes e and appends its MAC:
//
//	"BRAINCC\x01" | u32le len | binding | u32le len | identity |
//	u32le len | wazero key | u32le len | code | HMAC-SHA256(key, all before)
func sealEntry(key []byte, e cacheEntry) []byte {
	var buf bytes.Buffer
	buf.Write(entryMagic)
	for _, field := range [][]byte{[]byte(e.binding), []byte(e.identity), []byte(e.wazeroKey), e.code} {
		_ = binary.Write(&buf, binary.LittleEndian, uint32(len(field)))
		buf.Write(field)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(buf.Bytes())
	return mac.Sum(buf.Bytes())
}

// openEntry checks b's MAC under key before decoding anything else, then
// that it was written by this build (binding) for this payload (identity).
// It never trusts a length it has not bounded.
func openEntry(key, b []byte, binding, identity string) (cacheEntry, error) {
	if len(b) < len(entryMagic)+sha256.Size || !bytes.Equal(b[:len(entryMagic)], entryMagic) {
		return cacheEntry{}, errors.New("not a brain cache entry")
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), sum) {
		return cacheEntry{}, errors.New("its MAC does not verify: it was not written by this host, or was changed since")
	}
	rest := body[len(entryMagic):]
	var fields [4][]byte
	for i := range fields {
		if len(rest) < 4 {
			return cacheEntry{}, errors.New("truncated")
		}
		n := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return cacheEntry{}, errors.New("a field runs past the end")
		}
		fields[i], rest = rest[:n], rest[n:]
	}
	if len(rest) != 0 {
		return cacheEntry{}, errors.New("trailing bytes")
	}
	e := cacheEntry{binding: string(fields[0]), identity: string(fields[1]), wazeroKey: string(fields[2]), code: fields[3]}
	if !isWazeroKey(e.wazeroKey) {
		return cacheEntry{}, errors.New("malformed wazero key")
	}
	if e.binding != binding {
		return cacheEntry{}, fmt.Errorf("%w: written by %q, this build is %q", errStaleEntry, e.binding, binding)
	}
	if e.identity != identity {
		return cacheEntry{}, fmt.Errorf("it holds the code of payload %s, not of %s", e.identity, identity)
	}
	return e, nil
}

// isWazeroKey reports whether s is a wazero cache file name: the hex of a
// sha-256, and so safe as a file name.
func isWazeroKey(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}
