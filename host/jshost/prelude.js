// The host's side of a JavaScript payload's realm, evaluated before the
// payload's module. It is given the one host function of the realm, keeps
// it in this closure (no global holds it), builds the handle objects a
// call is given, and returns the dispatcher the Go host calls: nothing
// else of the host is reachable from the payload. The payload's module
// registers its tool through the symbol brain.register, which exists only
// while the module evaluates. Why a prelude and not SDK code:
// docs/RATIONALE.md, "Why does the host build the handle objects?".
(function (host, isProxy, maxElements, bytesOut, bytesIn) {
  "use strict";
  const REGISTER = Symbol.for("brain.register");
  const freeze = Object.freeze;
  const stringify = JSON.stringify;
  const parse = JSON.parse;

  // The Array methods whose loop over a length runs in C without calling
  // script code or allocating: over the holes of a sparse array
  // (Array(2 ** 32 - 1).indexOf(1)) or an array-like ({length: 2 ** 53 -
  // 1}), they would run on for minutes or for ever past the call's
  // deadline, where neither the engine's interrupt nor the memory limit
  // reaches them. A genuine array of at most maxElements elements (no
  // array holds more within the memory limit, 16 bytes an element) runs
  // the built-in as it is; any other receiver — a longer array, which
  // can only be holes, an array-like, a Proxy (which only the host can
  // tell from an array) — runs it on a Proxy whose traps forward every
  // read, test and write to the receiver: each trap is a call into
  // script code, where the engine polls its interrupt, so the deadline
  // stops it. What the method does is the built-in's own; what differs is
  // that a callback is given the Proxy as its third argument (flatMap's
  // is given the receiver). Why:
  // docs/RATIONALE.md, "Why are some Array methods wrapped in a
  // TypeScript tool's realm?".
  {
    const ArrayProto = Array.prototype, isArray = Array.isArray, Proxy_ = Proxy, ObjectCtor = Object;
    const apply = Reflect.apply, rget = Reflect.get, rset = Reflect.set, rhas = Reflect.has, dp = Object.defineProperty;
    const trunc = Math.trunc;
    // The handlers have no prototype: a trap the payload adds to
    // Object.prototype (deleteProperty, ownKeys, …) is not one of ours.
    const polling = (O) => {
      const p = new Proxy_(O, {
        __proto__: null,
        has: (t, k) => rhas(t, k),
        get: (t, k, r) => rget(t, k, r === p ? t : r),
        set: (t, k, v, r) => rset(t, k, v, r === p ? t : r),
      });
      return p;
    };
    const plain = (x) => isArray(x) && !isProxy(x) && x.length <= maxElements;
    const install = (name, w) => {
      dp(w, "length", { value: ArrayProto[name].length });
      dp(ArrayProto, name, { value: w });
    };
    const guard = (name) => {
      const orig = ArrayProto[name];
      install(name, { [name]() {
        const o = this;
        if (isArray(o) && !isProxy(o) && o.length <= maxElements) return apply(orig, o, arguments);
        const args = arguments;
        if (o === undefined || o === null) return apply(orig, o, args); // the method's own TypeError
        const O = ObjectCtor(o);
        const p = polling(O);
        const r = apply(orig, p, args);
        return r === p ? O : r;
      } }[name]);
    };
    for (const m of ["indexOf", "lastIndexOf", "includes", "reverse", "copyWithin", "fill", "join", "toLocaleString",
      "forEach", "map", "filter", "some", "every", "reduce", "reduceRight",
      "slice", "splice", "shift", "unshift", "sort"]) {
      guard(m);
    }

    // flat and flatMap loop in C over their receiver and, depth levels
    // down, over each element that is an array (flatMap: each array its
    // callback returns), so guarding the receiver is not enough: [s].flat()
    // (s 2 ** 32 - 1 holes) or Array(1000).fill(m).flat() (m maxElements
    // holes) would loop billions of times in C. Both run as the built-in
    // flatMap, on the receiver as the guards above give it, with a
    // callback (a call at each element, where the engine polls) that
    // hands the loop, in place of each array it would flatten:
    // - at the last level, where the loop copies the array's elements and
    //   looks no deeper: the array as it is while it is genuine and within
    //   what is left of a budget of maxElements for the call, else a
    //   polling Proxy of it;
    // - with levels to go: a genuine array of what flattening it those
    //   levels gives, made by a loop in script (see into).
    // Species, the receiver's reads and the rest are the built-in's own.
    const origFlat = ArrayProto.flat, origFlatMap = ArrayProto.flatMap, setProto = Object.setPrototypeOf;
    const MAX_LENGTH = 2 ** 53 - 1;
    // toLength and toDepth convert as the built-in does: ToLength, and
    // ToIntegerOrInfinity (which flat clamps to an int32: the same to it).
    const toLength = (x) => {
      const n = trunc(x);
      return n > 0 ? (n < MAX_LENGTH ? n : MAX_LENGTH) : 0;
    };
    const toDepth = (x) => {
      const n = trunc(x);
      return n !== n ? 0 : n;
    };
    // leafing returns the callback for the last level, which holds the
    // call's budget.
    const leafing = () => {
      let budget = maxElements;
      return (v) => {
        if (!isArray(v)) return v;
        if (!isProxy(v)) {
          const n = v.length;
          if (n <= budget) {
            budget -= n;
            return v;
          }
        }
        return polling(v);
      };
    };
    // into appends to r what flattening src, an array, depth levels deep
    // gives, with the reads, tests and errors of the built-in's loop, in
    // its order.
    const into = (r, src, depth) => {
      const n = toLength(src.length);
      for (let i = 0; i < n; i++) {
        if (i in src) {
          const v = src[i];
          if (depth > 0 && isArray(v)) into(r, v, depth - 1);
          else r[r.length] = v;
        }
      }
    };
    // flatten returns the callback for flat's depth.
    const flatten = (depth) => {
      if (depth <= 0) return (v) => [v]; // v, which the loop copies as it is
      if (depth === 1) return leafing();
      return (v) => {
        if (!isArray(v)) return v;
        const r = [];
        setProto(r, null); // no setter of the payload's sees it built
        into(r, v, depth - 1);
        return r;
      };
    };
    install("flat", { flat() {
      const o = this, args = arguments, d = args[0];
      if (o === undefined || o === null) return apply(origFlat, o, args); // the method's own TypeError
      const O = ObjectCtor(o);
      if (plain(O)) {
        // Reading a genuine array's length has no effect: the depth may be
        // converted first.
        const depth = d === undefined ? 1 : toDepth(d);
        if (depth <= 0) return apply(origFlat, O, [0]);
        return apply(origFlatMap, O, [flatten(depth)]);
      }
      if (d === undefined) return apply(origFlatMap, polling(O), [flatten(1)]);
      // The built-in converts the depth after it has read the length: so
      // does this Proxy, when the built-in reads the length through it.
      let cb = null;
      const p = new Proxy_(O, {
        __proto__: null,
        has: (t, k) => rhas(t, k),
        get(t, k) {
          const v = rget(t, k, t);
          if (k !== "length" || cb !== null) return v;
          const n = toLength(v);
          cb = flatten(toDepth(d));
          return n;
        },
      });
      return apply(origFlatMap, p, [(v) => cb(v)]);
    } }.flat);
    install("flatMap", { flatMap(fn, thisArg) {
      const o = this, args = arguments;
      // The method's own TypeError, once it has read the length.
      if (o === undefined || o === null || typeof fn !== "function") return apply(origFlatMap, o, args);
      const O = ObjectCtor(o), leaf = leafing();
      // fn is given the receiver, not a Proxy of it, as its third argument.
      const cb = thisArg === undefined ? (v, i) => leaf(fn(v, i, O)) : (v, i) => leaf(apply(fn, thisArg, [v, i, O]));
      return apply(origFlatMap, plain(O) ? O : polling(O), [cb]);
    } }.flatMap);

    // concat loops in C over its receiver and each spreadable argument:
    // the genuine arrays go in as they are while the sum of their lengths
    // stays within maxElements (Array.prototype.concat.apply([],
    // Array(2000).fill(m)), m maxElements holes, would loop eight billion
    // times), and each other spreadable object as a polling Proxy (a Proxy
    // of an array is still an array to concat). An object that is not
    // spread goes in as a one-element array-like of it, so that the
    // built-in, which reads Symbol.isConcatSpreadable again, cannot be
    // told otherwise by a getter the second time: what the wrapper reads
    // once (the spec reads it once too) is what the built-in is told.
    const concatSym = Symbol.isConcatSpreadable, origConcat = ArrayProto.concat;
    // A spreadable object goes in as a Proxy of it whose
    // isConcatSpreadable is the flag the wrapper read.
    const spreadTraps = {
      __proto__: null,
      has: (t, k) => rhas(t, k),
      get(t, k) {
        return k === concatSym ? this.flag : rget(t, k, t);
      },
    };
    // A receiver that is not spread goes in as a Proxy that is, for
    // species, an array if it is one, with its constructor, and for the
    // loop, [it]; its target is an empty object or array, whose
    // invariants allow that (the receiver's might not: a String's length).
    const singleTraps = {
      __proto__: null,
      has: (t, k) => k === "0" || rhas(t, k),
      get(t, k) {
        return k === concatSym ? true : k === "length" ? 1 : k === "0" ? this.x : rget(this.x, k, this.x);
      },
    };
    install("concat", { concat() {
      const o = this, args = arguments;
      if (o === undefined || o === null) return apply(origConcat, o, args); // the method's own TypeError
      const O = ObjectCtor(o);
      let budget = maxElements, asIs = true;
      // item is what the built-in is given for x; the receiver when this.
      const item = (x, self) => {
        if (x === null || (typeof x !== "object" && typeof x !== "function")) return x;
        if (isArray(x) && !isProxy(x) && x.length <= budget) {
          budget -= x.length;
          return x;
        }
        asIs = false;
        const flag = x[concatSym];
        if (flag !== undefined ? !!flag : isArray(x)) return new Proxy_(x, { __proto__: spreadTraps, flag });
        if (self) return new Proxy_(isArray(x) ? [] : {}, { __proto__: singleTraps, x });
        return { __proto__: null, [concatSym]: true, length: 1, 0: x };
      };
      // items is an array-like of no prototype: no setter of the payload's
      // sees it built.
      const r = item(O, true), n = args.length, items = { __proto__: null, length: n };
      for (let i = 0; i < n; i++) items[i] = item(args[i], false);
      return asIs ? apply(origConcat, O, args) : apply(origConcat, r, items);
    } }.concat);
  }

  // CapabilityError is what a handle operation throws: the SDK's class
  // when the payload registered it (so that instanceof works in the
  // tool's code), else this one, with the same shape.
  let CapabilityError = class CapabilityError extends Error {
    constructor(code, message, where) {
      super(message);
      this.name = "CapabilityError";
      this.code = code;
      this.handle = where && where.handle;
      this.op = where && where.op;
    }
  };

  // Bytes cross to and from the host outside the JSON, through the
  // engine's own functions (jsvm's DefineBytes): bytesOut copies a
  // Uint8Array's bytes to the host for the operation called next, and
  // bytesIn makes a buffer of the bytes an operation handed back, oldest
  // first. In base64 inside JSON the realm held the bytes about four times.
  const Uint8ArrayCtor = Uint8Array;
  function handOver(b) {
    if (typeof b === "string") b = utf8(b);
    if (!(b instanceof Uint8ArrayCtor)) throw new TypeError("want a Uint8Array or a string");
    bytesOut(b); // throws a TypeError for a look-alike (a Proxy of one)
  }
  const takeBytes = () => new Uint8ArrayCtor(bytesIn());
  // utf8 encodes s as UTF-8 into a Uint8Array sized by a first pass (a
  // number[] takes about 16 bytes an element); lone surrogates become
  // U+FFFD.
  function utf8(s) {
    const len = s.length;
    let n = 0;
    for (let i = 0; i < len; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c <= 0xdbff && c >= 0xd800 && i + 1 < len && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { n += 4; i++; }
      else n += 3;
    }
    const out = new Uint8Array(n);
    let j = 0;
    for (let i = 0; i < len; i++) {
      let c = s.charCodeAt(i);
      if (c < 0x80) { out[j++] = c; continue; }
      if (c < 0x800) { out[j++] = 0xc0 | (c >> 6); out[j++] = 0x80 | (c & 63); continue; }
      if (c >= 0xd800 && c <= 0xdfff) {
        if (c <= 0xdbff && i + 1 < len && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
          c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00);
          out[j++] = 0xf0 | (c >> 18); out[j++] = 0x80 | ((c >> 12) & 63); out[j++] = 0x80 | ((c >> 6) & 63); out[j++] = 0x80 | (c & 63);
          continue;
        }
        c = 0xfffd;
      }
      out[j++] = 0xe0 | (c >> 12); out[j++] = 0x80 | ((c >> 6) & 63); out[j++] = 0x80 | (c & 63);
    }
    return out;
  }

  // call runs one handle operation on the Go side, synchronously.
  function call(op, arg) {
    const r = parse(host(op, stringify(arg === undefined ? null : arg)));
    if (r.ok) return r.value;
    const e = r.error;
    throw new CapabilityError(e.code, e.message, { handle: e.handle, op: e.op });
  }
  const async = (f) => function () {
    try {
      return Promise.resolve(f.apply(undefined, arguments));
    } catch (e) {
      return Promise.reject(e);
    }
  };
  // ms turns exec.run's timeoutMs into Go's nanoseconds: absent is the
  // grant's; a negative one is the handle's to refuse (invalid_argument),
  // as Go's is, and anything but a finite number is refused here.
  const ms = (d) => {
    if (d === undefined || d === null) return 0;
    if (typeof d !== "number" || !Number.isFinite(d)) {
      throw new CapabilityError("invalid_argument", "timeoutMs " + String(d) + " is not a number of milliseconds", { handle: "exec", op: "run" });
    }
    return Math.round(d * 1e6);
  };
  const info = (i) => freeze({ name: i.name, size: i.size, mode: i.mode, modTime: i.modTime, isDir: i.isDir });
  // The host hands exec's stdout, then its stderr, back.
  const result = (r) => { const stdout = takeBytes(), stderr = takeBytes(); return freeze({ exitCode: r.exitCode, stdout, stderr, truncated: !!r.truncated, durationMs: r.duration / 1e6 }); };
  const SKIP = Symbol("skip");
  const makers = {
    exec: () => ({
      run: async((cmd) => {
        const staged = cmd.stdin !== undefined;
        if (staged) handOver(cmd.stdin);
        return result(call("exec.run", {
          program: cmd.program, args: cmd.args, dir: cmd.dir, env: cmd.env, staged,
          timeout: ms(cmd.timeoutMs), maxOutput: cmd.maxOutput,
        }));
      }),
    }),
    fs: () => {
      const fs = {
        readFile: async((path) => { call("fs.readFile", { path }); return takeBytes(); }),
        writeFile: async((path, data) => { handOver(data); call("fs.writeFile", { path, staged: true }); }),
        readDir: async((path) => call("fs.readDir", { path }).map(info)),
        stat: async((path) => info(call("fs.stat", { path }))),
        mkdirAll: async((path) => { call("fs.mkdirAll", { path }); }),
        remove: async((path) => { call("fs.remove", { path }); }),
        rename: async((from, to) => { call("fs.rename", { from, to }); }),
        symlink: async((target, link) => { call("fs.symlink", { target, link }); }),
        link: async((target, link) => { call("fs.link", { target, link }); }),
        glob: async((pattern) => call("fs.glob", { pattern })),
        // walk is the handle's Walk (the host's fs.walkStart/Next/Stop,
        // host/jshost/walk.go): path and everything under it in lexical
        // order, within the grant's entry limit; fn may return fs.SKIP_DIR
        // (or a promise of it) to skip a directory (for a file, the rest of
        // its directory). The handle's failures carry op "walk"; fn's
        // errors pass as they are.
        walk: async(async (path, fn) => {
          const id = call("fs.walkStart", { path });
          try {
            let skip = false;
            for (;;) {
              const e = call("fs.walkNext", { id, skip });
              if (e.done) return;
              skip = (await fn(e.path, info(e.info))) === SKIP;
            }
          } finally {
            call("fs.walkStop", { id });
          }
        }),
        SKIP_DIR: SKIP,
      };
      return fs;
    },
    net: () => ({
      fetch: async((req) => {
        const staged = req.body !== undefined;
        if (staged) handOver(req.body);
        const r = call("net.fetch", { method: req.method, url: req.url, header: req.header, staged });
        return freeze({ status: r.status, header: r.header || {}, body: takeBytes(), url: r.url });
      }),
    }),
    js: () => ({
      call: async((source, args) => call("js.call", { source, args })),
    }),
    page: () => ({
      navigate: async((url) => { call("page.navigate", { url }); }),
      text: async((selector) => call("page.text", { selector: selector || "" })),
      evaluate: async((expression) => call("page.evaluate", { expression })),
      screenshot: async(() => { call("page.screenshot", null); return takeBytes(); }),
    }),
  };

  const ProxyOf = Proxy, hasOwn = Object.hasOwn, reflectGet = Reflect.get; // read before any payload code runs
  let tool = null;
  globalThis[REGISTER] = (t, sdk) => {
    if (tool !== null) throw new Error("the payload defines more than one tool");
    if (t === null || typeof t !== "object" || typeof t.run !== "function") throw new TypeError("tool(): run must be a function");
    tool = t;
    if (sdk && typeof sdk.CapabilityError === "function") CapabilityError = sdk.CapabilityError;
  };

  let handles = null;
  let bindings = freeze({});
  let settled = null;
  // The global object's own keys after init: what a call adds is deleted
  // when it ends, so that no global passes from one call to the next
  // (module scope is the place for state a tool keeps on purpose).
  let baseline = null;
  // tidy deletes the globals the call added; it reports false when one
  // cannot be deleted, and the host then drops the realm.
  //
  // Own keys keep an order: integer keys first, then strings, then
  // symbols, each by when they were added. The global object's keys
  // after init have no integer key (fast) and one symbol
  // (Symbol.toStringTag), so a few reads tell an untouched global object
  // (see same), and only a changed one is walked.
  function tidy() {
    if (baseline === null) return true;
    const keys = ownKeys(globalThis);
    let clean = getProto(globalThis) === globalProto && isExtensible(globalThis);
    if (fast && same(keys)) return clean;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i];
      if (!baseline.has(k) && !deleteProperty(globalThis, k)) clean = false;
    }
    return clean;
  }
  const ownKeys = Reflect.ownKeys;
  const deleteProperty = Reflect.deleteProperty;
  const getProto = Object.getPrototypeOf;
  const isExtensible = Object.isExtensible;
  let baseKeys = [];
  let fast = false; // the baseline has no integer key: see tidy
  let symbols = 0; // the baseline's symbol keys, which come last
  // same reports whether keys, the global object's keys now, are the
  // baseline's: the count, the first key, and the last string key with
  // the symbols after it. A key added among the integers changes the
  // first; among the strings, the last string (which is where a new one
  // goes, also when another was deleted); among the symbols, the last.
  function same(keys) {
    const n = keys.length;
    if (n !== baseKeys.length || keys[0] !== baseKeys[0]) return false;
    for (let i = 1; i <= symbols + 1 && i <= n; i++) {
      if (keys[n - i] !== baseKeys[n - i]) return false;
    }
    return true;
  }
  const globalProto = Object.getPrototypeOf(globalThis);

  // The call's script is stopped at its deadline or cancellation with an
  // exception no code catches, so the signal a call sees never fires.
  const signal = freeze({ aborted: false, reason: undefined, onabort: null, addEventListener() {}, removeEventListener() {}, throwIfAborted() {} });
  const options = freeze({});
  function context(c) {
    // Not frozen: a tool that changes its own context harms only itself,
    // and freezing costs every call.
    return ({
      handles, bindings, signal,
      deadline: c.deadline,
      callId: c.id,
      requestId: c.id,
      workspace: c.workspace || undefined,
      session: c.session || undefined,
      options,
      progress(done, total, message) {
        call("progress", { done: +done || 0, total: +total || 0, message: message === undefined ? "" : String(message) });
      },
    });
  }

  function failure(e) {
    if (e === null || e === undefined) return { ok: false, thrown: { null: e === null } };
    const t = { name: "", message: "", code: "", stack: "", handle: "", op: "" };
    try {
      if (typeof e === "object" || typeof e === "function") {
        t.name = typeof e.name === "string" ? e.name : "";
        t.message = typeof e.message === "string" ? e.message : String(e);
        t.code = typeof e.code === "string" ? e.code : "";
        t.stack = typeof e.stack === "string" ? e.stack : "";
        if (e instanceof CapabilityError) {
          // One the tool made itself has no handle or op: its message
          // alone is the outcome's.
          t.handle = e.handle == null ? "" : String(e.handle);
          t.op = e.op == null ? "" : String(e.op);
        }
      } else {
        t.message = String(e);
      }
    } catch (x) {
      t.message = "(the thrown value could not be read)";
    }
    return { ok: false, thrown: t };
  }
  const done = (v) => ({ ok: true, value: v === undefined ? null : v });
  const encode = (r) => {
    try {
      if (r.ok) {
        // The form the Go side reads without decoding: {"ok":true,"value":…}
        const v = stringify(r.value);
        return '{"ok":true,"value":' + (v === undefined ? "null" : v) + "}";
      }
      return stringify(r);
    } catch (e) {
      // The engine's own limits, met while encoding (a result nested
      // past the call stack, or too large for the memory), are the
      // outcome's as when the tool meets them itself: too_large.
      let limit = "";
      try {
        if (e !== null && typeof e === "object" && e.name === "InternalError" && (e.message === "stack overflow" || e.message === "out of memory" || e.message === "string too long")) limit = e.message;
      } catch (x) {}
      if (limit !== "") return stringify({ ok: false, thrown: { name: "InternalError", message: limit, code: "", stack: "" } });
      return stringify({ ok: false, thrown: { name: "TypeError", message: "the result cannot be encoded as JSON: " + String(e && e.message), code: "", stack: "" } });
    }
  };
  // settle runs f and encodes its outcome, or leaves it to a promise:
  // "" means pending (the Go side runs the jobs, then asks take).
  function settle(f) {
    settled = null;
    let r;
    try {
      r = f();
    } catch (e) {
      return finish(failure(e));
    }
    if (r === null || (typeof r !== "object" && typeof r !== "function") || typeof r.then !== "function") return finish(done(r));
    Promise.resolve(r).then((v) => { settled = later(() => finish(done(v))); }, (e) => { settled = later(() => finish(failure(e))); });
    return "";
  }
  // later settles a promise's outcome: what finish throws (encoding a
  // result that leaves the engine no memory, which the catch in encode
  // cannot survive either) is the call's outcome, as it is when it
  // escapes settle, instead of a reaction that rejects unseen and a call
  // that "never settled".
  const OUT_OF_MEMORY = '{"ok":false,"thrown":{"name":"InternalError","message":"out of memory"}}';
  function later(f) {
    try {
      return f();
    } catch (e) {
      try {
        return stringify(failure(e));
      } catch (x) {
        return OUT_OF_MEMORY;
      }
    }
  }
  // finish encodes an outcome and tidies the global object. An outcome
  // whose realm must be dropped starts {"dirty":true, so that the Go
  // side, which reads {"ok":true,"value": without decoding, decodes it.
  function finish(o) {
    const s = encode(o);
    if (!tidy()) return '{"dirty":true,' + s.slice(1);
    return s;
  }

  return function dispatch(op, arg) {
    switch (op) {
      case "seal": {
        delete globalThis[REGISTER];
        if (tool === null) return stringify({ ok: false, error: "the payload's module defined no tool: a payload calls tool() from @brainrt/sdk once" });
        const req = Array.isArray(tool.requires) ? tool.requires.slice() : [];
        const bn = tool.bindings && typeof tool.bindings === "object" ? Object.keys(tool.bindings) : [];
        return stringify({ ok: true, name: String(tool.name), requires: req, bindings: bn });
      }
      case "init": {
        const a = parse(arg);
        bindings = freeze(a.bindings || {});
        const hs = {};
        for (const k of a.requires) hs[k] = freeze(makers[k]());
        // A handle the tool did not declare is not given: reading it says
        // so, where it would read undefined and fail later with "cannot
        // read property 'run' of undefined". The object has only the
        // declared handles ("fs" in handles is false for another, as its
        // keys leave it out); a proxy answers the read of another. Its
        // handler has no prototype: a trap the payload adds to
        // Object.prototype is not one of ours.
        const declared = stringify(a.requires);
        handles = new ProxyOf(freeze(hs), { __proto__: null, get(target, k, receiver) {
          if (typeof k === "string" && !hasOwn(target, k) && hasOwn(makers, k)) {
            throw new TypeError("ctx.handles." + k + ': the handle "' + k + '" is not in this tool\'s requires (' + declared + '): add "' + k + '" to requires in tool() to be given it');
          }
          return reflectGet(target, k, receiver);
        } });
        if (typeof tool.init !== "function") return encode(done(null));
        return settle(() => tool.init(context(a)));
      }
      case "baseline": {
        baseKeys = ownKeys(globalThis);
        baseline = new Set(baseKeys);
        fast = true;
        symbols = 0;
        for (const k of baseKeys) {
          if (typeof k === "symbol") symbols++;
          else if (String(k >>> 0) === k) fast = false;
        }
        return "";
      }
      case "invoke": {
        const a = parse(arg);
        // The SDK's invoke parses the input with the tool's own schema
        // (defaults, transforms) before run; a bare run gets it as it is.
        const c = context(a);
        return settle(() => (typeof tool.invoke === "function" ? tool.invoke(c, a.input) : tool.run(c, a.input)));
      }
      case "take":
        return settled === null ? "" : settled;
      case "tidy":
        // After the jobs a settled call left ran: "1" when a global they
        // added cannot be deleted.
        return tidy() ? "" : "1";
    }
    throw new Error("unknown dispatch " + op);
  };
})
