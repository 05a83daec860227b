package jshost

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
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"modernc.org/quickjs"

	"github.com/brainrt/brain/internal/jsvm"
	"github.com/brainrt/brain/protocol"
)

// The bytecode cache. QuickJS runs bytecode without checking it (a
// forged function could read and write anywhere in the engine's heap),
// so an entry is trusted only under a MAC: HMAC-SHA256, under a key kept
// in the cache directory (mode 0600), over the cache binding (format,
// QuickJS version, prelude version, Go version, platform), the payload
// identity and the bytecode. A bad entry is deleted and the payload
// compiled again; it is never fatal.
//
// Layout of <CacheDir>/js (beside the WebAssembly host's entries):
//
//	key             32 random bytes, mode 0600
//	<hex>           one sealed entry per payload identity
const (
	cacheSub       = "js"
	cacheKeyFile   = "key"
	cacheFormat    = "brain-js-cache/1"
	preludeVersion = 1
	maxEntryBytes  = 256 << 20
)

var entryMagic = []byte("BRAINJS\x01")

type codeCache struct {
	dir     string
	key     []byte
	binding string
}

func openCache(root string) (*codeCache, error) {
	dir := filepath.Join(root, cacheSub)
	for _, d := range []string{root, dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("cache dir: %w", err)
		}
		if err := checkPrivateDir(d); err != nil {
			return nil, err
		}
	}
	key, err := cacheKey(filepath.Join(dir, cacheKeyFile))
	if err != nil {
		return nil, err
	}
	return &codeCache{dir: dir, key: key,
		binding: fmt.Sprintf("%s quickjs/%s prelude/%d %s %s/%s", cacheFormat, quickjs.Version(), preludeVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)}, nil
}

// checkPrivateDir refuses a directory writable by group or others, or
// owned by another user: bytecode in it runs as trusted.
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

func (c *codeCache) path(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:]))
}

// seal encodes "BRAINJS\x01" | u32 len | binding | u32 len | identity |
// u32 len | code | HMAC-SHA256(key, all before).
func (c *codeCache) seal(identity string, code []byte) []byte {
	var buf bytes.Buffer
	buf.Write(entryMagic)
	for _, f := range [][]byte{[]byte(c.binding), []byte(identity), code} {
		_ = binary.Write(&buf, binary.LittleEndian, uint32(len(f)))
		buf.Write(f)
	}
	mac := hmac.New(sha256.New, c.key)
	mac.Write(buf.Bytes())
	return mac.Sum(buf.Bytes())
}

// open checks b's MAC before anything else, then that it was written by
// this build for identity, and returns the bytecode.
func (c *codeCache) open(b []byte, identity string) ([]byte, error) {
	if len(b) < len(entryMagic)+sha256.Size || !bytes.Equal(b[:len(entryMagic)], entryMagic) {
		return nil, errors.New("not a brain bytecode entry")
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	mac := hmac.New(sha256.New, c.key)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), sum) {
		return nil, errors.New("its MAC does not verify: it was not written by this host, or was changed since")
	}
	rest := body[len(entryMagic):]
	var fields [3][]byte
	for i := range fields {
		if len(rest) < 4 {
			return nil, errors.New("truncated")
		}
		n := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, errors.New("a field runs past the end")
		}
		fields[i], rest = rest[:n], rest[n:]
	}
	switch {
	case len(rest) != 0:
		return nil, errors.New("trailing bytes")
	case string(fields[0]) != c.binding:
		return nil, fmt.Errorf("stale: written by %q, this build is %q", fields[0], c.binding)
	case string(fields[1]) != identity:
		return nil, fmt.Errorf("it holds the bytecode of payload %s, not of %s", fields[1], identity)
	}
	return fields[2], nil
}

func (c *codeCache) load(identity string) ([]byte, bool) {
	p := c.path(identity)
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxEntryBytes {
		return nil, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	code, err := c.open(b, identity)
	if err != nil {
		_ = os.Remove(p)
		return nil, false
	}
	return code, true
}

func (c *codeCache) store(identity string, code []byte) error {
	f, err := os.CreateTemp(c.dir, ".entry-*")
	if err != nil {
		return err
	}
	_, err = f.Write(c.seal(identity, code))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.path(identity))
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// bytecode returns the compiled module of a payload whose identity the
// caller verified: from memory, from a verified cache entry, or compiled
// now (and cached).
func (h *Host) bytecode(ctx context.Context, identity string, payload []byte) ([]byte, error) {
	h.mu.Lock()
	code, ok := h.compiled[identity]
	h.mu.Unlock()
	if ok {
		return code, nil
	}
	if h.cache != nil {
		if code, ok := h.cache.load(identity); ok {
			h.remember(identity, code)
			return code, nil
		}
	}
	vm, err := jsvm.New(jsvm.Limits{MemoryBytes: int64(h.opts.MemoryLimitMiB) << 20})
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "compile: %v", err)
	}
	defer vm.Close()
	ctx, cancel := context.WithTimeout(ctx, h.opts.InitTimeout)
	defer cancel()
	err = vm.Run(ctx, func(q *quickjs.VM) error {
		var err error
		code, err = q.Compile(string(payload), quickjs.EvalModule)
		return err
	})
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "payload does not compile: %v", err)
	}
	h.remember(identity, code)
	if h.cache != nil {
		if err := h.cache.store(identity, code); err != nil {
			h.log.Warn("cannot write a bytecode cache entry", "payload", identity, "error", err.Error())
		}
	}
	return code, nil
}

func (h *Host) remember(identity string, code []byte) {
	h.mu.Lock()
	h.compiled[identity] = code
	h.mu.Unlock()
}
