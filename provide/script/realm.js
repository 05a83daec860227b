// The host's side of a js handle realm, evaluated once when the realm is
// made, before any script: it takes the built-ins it uses while they are
// still the originals, wraps eval and the Function constructors (a bound
// on the source they compile, and a note when it may declare a private
// name), removes what would carry state from call to call, freezes every
// intrinsic with the override mistake tamed, and returns the dispatcher
// the Go side calls. It is given the realm's one host function, stop,
// which it keeps in this closure (no global holds it). Why each step:
// provide/script/realm.go and docs/handle-js.md.
(function (stop, isProxy, heapLeft, maxScript, maxElements, names) {
  "use strict";
  // The host functions' globals go first, before anything is frozen.
  for (const n of names) if (!Reflect.deleteProperty(globalThis, n)) throw new Error("cannot delete " + n);
  const freeze = Object.freeze, gopd = Object.getOwnPropertyDescriptor, dp = Object.defineProperty;
  const gpo = Object.getPrototypeOf, spo = Object.setPrototypeOf, isExtensible = Object.isExtensible;
  const ownKeys = Reflect.ownKeys, deleteProperty = Reflect.deleteProperty, apply = Reflect.apply, construct = Reflect.construct;
  const parse = JSON.parse, stringify = JSON.stringify;
  const then = Promise.prototype.then;
  const toStr = String, indexOf = String.prototype.indexOf;
  const InternalError_ = InternalError, RangeError_ = RangeError;
  const evalOrig = eval;

  // marks is what the running call did that tidy cannot undo: 1 when it
  // compiled source that may declare a private name (#x), which can be
  // stamped on a frozen built-in and never removed.
  let marks = 0;
  function checkSource(what, s, n) {
    if (n > maxScript) {
      const msg = what + " of " + n + " characters; the limit is " + maxScript;
      stop(msg); // the call ends too_large at the engine's next poll
      throw new RangeError_(msg);
    }
    if (apply(indexOf, s, ["#"]) >= 0) marks |= 1;
  }

  // eval keeps its name and length; a wrapper makes every call of it an
  // indirect eval (in the global scope), as it was with goja.
  const evalWrap = { eval(x) { if (typeof x === "string") checkSource("eval", x, x.length); return evalOrig(x); } }.eval;
  dp(globalThis, "eval", { value: evalWrap });

  // The Function constructors, reached by name (Function) or through a
  // prototype's constructor (generators, async functions).
  function wrapCtor(orig, what, global) {
    const w = function (...args) {
      const parts = [];
      let n = 0;
      for (let i = 0; i < args.length; i++) {
        parts[i] = toStr(args[i]);
        n += parts[i].length;
      }
      checkSource(what, parts.join("\n"), n);
      return construct(orig, parts, new.target === undefined ? w : new.target);
    };
    dp(w, "name", { value: orig.name });
    dp(w, "length", { value: 1 });
    dp(w, "prototype", { value: orig.prototype, writable: false, enumerable: false, configurable: false });
    spo(w, gpo(orig));
    dp(orig.prototype, "constructor", { value: w });
    if (global) dp(globalThis, global, { value: w });
  }
  const generatorFunction = gpo(function* () {}).constructor;
  const asyncFunction = gpo(async function () {}).constructor;
  const asyncGeneratorFunction = gpo(async function* () {}).constructor;
  wrapCtor(Function, "the Function constructor", "Function");
  wrapCtor(generatorFunction, "the GeneratorFunction constructor");
  wrapCtor(asyncFunction, "the AsyncFunction constructor");
  wrapCtor(asyncGeneratorFunction, "the AsyncGeneratorFunction constructor");


  // Guards for the Array methods whose loop over a length runs in C
  // without polling the interrupt, calling script code or allocating:
  // over the holes of a sparse array (Array(2 ** 32 - 1).indexOf(1)) or
  // an array-like ({length: 2 ** 53 - 1}), they would run on for minutes
  // or for ever past the deadline, where neither the interrupt nor the
  // memory limit reaches them. No array can hold more than maxElements
  // elements within the memory budget (an element takes 16 bytes), so a
  // longer length can only be holes, and the call ends too_large. The
  // length a guard checks is the one the method then uses: an array's is
  // a data property no script code computes; any other receiver (an
  // array-like, a Proxy, which only the host can tell from an array) has
  // its length read once and the method runs on a Proxy of it that
  // answers that length, so that a getter or a trap cannot report a small
  // length to the guard and a huge one to the method.
  const ArrayProto = Array.prototype, isArray = Array.isArray, Proxy_ = Proxy, ObjectCtor = Object;
  const get = Reflect.get, has = Reflect.has, floor = Math.floor;
  function toLength(v) {
    const n = +v;
    if (!(n > 0)) return 0;
    return n >= 9007199254740991 ? 9007199254740991 : floor(n);
  }
  function tooLong(what, n) {
    const msg = what + " on a length of " + n + ": no array holds more than " + maxElements + " elements within the memory budget";
    stop(msg);
    throw new RangeError_(msg);
  }
  function tooBig(what) {
    const msg = what + ", more than the memory budget has left";
    stop(msg);
    throw new RangeError_(msg);
  }
  function realArray(o) {
    return isArray(o) && !isProxy(o);
  }
  // pin returns o, or a Proxy of it whose length stays len.
  function pin(O, len) {
    return new Proxy_(O, {
      get(t, k, r) { return k === "length" ? len : get(t, k, r); },
    });
  }
  // polled is a replacer for JSON.stringify, and defaultOrder a
  // comparator for sort, that leave what they are given as it is but run
  // a loop: its back edge counts toward the engine's poll of its
  // interrupt, which a built-in calling a function without one never
  // reaches. Without them JSON.stringify of a tree that shares its
  // branches (1 µs a node), or sort without a comparator (which turns
  // both elements into strings at each comparison), runs in C until it
  // ends, minutes within a 128 MiB budget, past any deadline.
  const polled = function (k, v) { for (let i = 0; i < 1; i++); return v; };
  const pollThrough = (f) => function (k, v) { for (let i = 0; i < 1; i++); return apply(f, this, [k, v]); };
  const defaultOrder = function (a, b) {
    for (let i = 0; i < 1; i++);
    const x = toStr(a), y = toStr(b);
    return x < y ? -1 : x > y ? 1 : 0;
  };
  function guard(name, holder, what) {
    const orig = holder[name];
    const w = { [name](...args) {
      const o = this;
      if (name === "sort" && args[0] === undefined) args = [defaultOrder];
      if (realArray(o)) {
        if (o.length > maxElements) tooLong(what, o.length);
        return apply(orig, o, args);
      }
      if (o === undefined || o === null) return apply(orig, o, args); // the method's own TypeError
      const O = ObjectCtor(o);
      const len = toLength(O.length);
      if (len > maxElements) tooLong(what, len);
      const p = pin(O, len);
      const r = apply(orig, p, args);
      return r === p ? O : r;
    } }[name];
    dp(w, "length", { value: orig.length });
    dp(holder, name, { value: w });
  }
  for (const m of ["indexOf", "lastIndexOf", "includes", "join", "toLocaleString", "slice", "splice",
    "reverse", "copyWithin", "fill", "flat", "flatMap", "forEach", "map", "filter", "some", "every",
    "reduce", "reduceRight", "sort", "shift", "unshift", "keys", "values", "entries"]) {
    guard(m, ArrayProto, "Array.prototype." + m);
  }
  dp(ArrayProto, Symbol.iterator, { value: ArrayProto.values });
  {
    const orig = ArrayProto.toSorted;
    const w = { toSorted(comparefn) { return apply(orig, this, [comparefn === undefined ? defaultOrder : comparefn]); } }.toSorted;
    dp(ArrayProto, "toSorted", { value: w });
  }
  {
    const w = { stringify(value, replacer, space) {
      const r = typeof replacer === "function" ? pollThrough(replacer) : replacer === undefined || replacer === null ? polled : replacer;
      return apply(stringify, JSON, [value, r, space]);
    } }.stringify;
    dp(w, "length", { value: 3 });
    dp(JSON, "stringify", { value: w });
  }
  // flat and flatMap loop in C over their receiver, which the guard above
  // checks, and also over each array they flatten — [s].flat() of an s of
  // 2 ** 32 - 1 holes, or Array(1000).fill(m).flat() of an m of a million
  // — which it did not. Both run as the guarded flatMap with a callback
  // of their own (a call at each element, where the engine polls) that
  // hands the loop, for each array it would flatten: at the last level,
  // the array, its length counted against maxElements for the call (a
  // long one's, or a Proxy's, read once and pinned, and its elements read
  // through script calls); with levels to go, a real array of
  // what flattening it those levels gives, built in script and counted
  // the same way. The depth is converted before the receiver's length is
  // read (the built-in reads the length first): only a depth whose
  // valueOf looks at the receiver can tell.
  {
    const flatMapGuarded = ArrayProto.flatMap, flatGuarded = ArrayProto.flat;
    // An array longer than small is flattened through a Proxy whose has
    // and get are script calls: holes cost nothing to make, and a loop
    // over millions of them in C (maxElements in all) would run past the
    // deadline by a quarter of a second.
    const small = 4096;
    const polledPin = (O, len) => new Proxy_(O, {
      has(t, k) { return has(t, k); },
      get(t, k, r) { return k === "length" ? len : get(t, k, r); },
    });
    const toDepth = (x) => {
      const n = +x;
      return n !== n ? 0 : n < 0 ? -floor(-n) : floor(n);
    };
    // counting returns the callback of one call, which holds its budget;
    // what is the method's name for the error.
    const counting = (depth, what) => {
      let total = 0;
      const count = (n) => {
        total += n;
        if (total > maxElements) tooLong(what, total);
      };
      const into = (r, src, d) => {
        const n = toLength(src.length);
        count(n);
        for (let i = 0; i < n; i++) {
          if (i in src) {
            const v = src[i];
            if (d > 0 && isArray(v)) into(r, v, d - 1);
            else r[r.length] = v;
          }
        }
      };
      return (v) => {
        if (!isArray(v)) return v;
        if (depth > 1) {
          const r = [];
          into(r, v, depth - 1);
          return r;
        }
        if (realArray(v) && v.length <= small) {
          count(v.length);
          return v;
        }
        const len = toLength(v.length);
        count(len);
        return polledPin(v, len);
      };
    };
    const flat = { flat(d) {
      const depth = d === undefined ? 1 : toDepth(d);
      if (depth <= 0) return apply(flatGuarded, this, [0]);
      return apply(flatMapGuarded, this, [counting(depth, "Array.prototype.flat")]);
    } }.flat;
    dp(flat, "length", { value: 0 });
    dp(ArrayProto, "flat", { value: flat });
    const flatMap = { flatMap(fn, thisArg) {
      if (typeof fn !== "function") return apply(flatMapGuarded, this, [fn, thisArg]); // the method's own TypeError
      const leaf = counting(1, "Array.prototype.flatMap");
      return apply(flatMapGuarded, this, [function (v, i, a) { return leaf(apply(fn, thisArg, [v, i, a])); }]);
    } }.flatMap;
    dp(flatMap, "length", { value: 1 });
    dp(ArrayProto, "flatMap", { value: flatMap });
  }
  // concat reads the length of its receiver and of every argument that
  // spreads: each real array's is checked; any other object is read once
  // (whether it spreads, its length) and pinned.
  {
    const orig = ArrayProto.concat, spreadable = Symbol.isConcatSpreadable;
    const w = { concat(...args) {
      let total = 0, pinned = null;
      const items = [this, ...args];
      for (let i = 0; i < items.length; i++) {
        const x = items[i];
        if (realArray(x) && x[spreadable] === undefined) {
          total += x.length;
        } else if (i > 0 && (typeof x === "object" || typeof x === "function") && x !== null) {
          const s = x[spreadable];
          const spreads = s !== undefined ? !!s : isArray(x);
          if (spreads) {
            const len = toLength(x.length);
            total += len;
            items[i] = new Proxy_(x, { get(t, k, r) { return k === "length" ? len : k === spreadable ? true : get(t, k, r); } });
          } else {
            items[i] = new Proxy_(x, { get(t, k, r) { return k === spreadable ? false : get(t, k, r); } });
            if (pinned === null) pinned = [];
            pinned[pinned.length] = [items[i], x];
          }
        } else if (i === 0 && this !== undefined && this !== null && !realArray(x)) {
          const O = ObjectCtor(x);
          const s = O[spreadable];
          if (s !== undefined ? !!s : isArray(O)) {
            const len = toLength(O.length);
            total += len;
            items[0] = new Proxy_(O, { get(t, k, r) { return k === "length" ? len : k === spreadable ? true : get(t, k, r); } });
          }
        } else {
          total += 1;
        }
        if (total > maxElements) tooLong("Array.prototype.concat", total);
      }
      // The result takes 16 bytes an element, copied one by one in C: a
      // doubling that cannot fit ends now rather than when the copy
      // reaches the limit.
      if (total > 65536 && total * 16 > heapLeft()) tooBig("Array.prototype.concat would build an array of " + total + " elements");
      const r = apply(orig, items[0], items.slice(1));
      if (pinned !== null) {
        // An object that does not spread is an element of the result:
        // the object itself, not its pinned Proxy.
        for (let i = 0; i < r.length; i++) {
          for (let j = 0; j < pinned.length; j++) if (r[i] === pinned[j][0]) r[i] = pinned[j][1];
        }
      }
      return r;
    } }.concat;
    dp(w, "length", { value: 1 });
    dp(ArrayProto, "concat", { value: w });
  }
  // String.prototype.concat builds its result in C without polling; its
  // arguments are turned into strings here (as the method would), and a
  // result that cannot fit ends the call before the copying starts.
  {
    const orig = String.prototype.concat;
    const w = { concat(...args) {
      if (this === undefined || this === null) return apply(orig, this, args);
      let n = toStr(this).length;
      for (let i = 0; i < args.length; i++) {
        args[i] = toStr(args[i]);
        n += args[i].length;
      }
      if (n > 65536 && n > heapLeft()) tooBig("String.prototype.concat would build a string of " + n + " characters");
      return apply(orig, this, args);
    } }.concat;
    dp(w, "length", { value: 1 });
    dp(String.prototype, "concat", { value: w });
  }
  // Iterator.prototype.drop counts its limit in C, calling next: over an
  // array's iterator, in C too.
  {
    const IteratorProto = Iterator.prototype, orig = IteratorProto.drop;
    const w = { drop(limit) {
      const n = +limit;
      if (n > maxElements) tooLong("Iterator.prototype.drop", n);
      return apply(orig, this, [limit]);
    } }.drop;
    dp(IteratorProto, "drop", { value: w });
  }

  // WeakRef and FinalizationRegistry make the collector observable: a
  // registry's callback made in one call would run in a later one.
  deleteProperty(globalThis, "WeakRef");
  deleteProperty(globalThis, "FinalizationRegistry");

  // Freeze everything reachable from the global object and from the
  // intrinsics that have no global name.
  const roots = [
    globalThis,
    gpo(function* () {}), gpo(async function () {}), gpo(async function* () {}),
    gpo([][Symbol.iterator]()), gpo(""[Symbol.iterator]()),
    gpo(new Map().entries()), gpo(new Set().values()),
    gpo(/a/[Symbol.matchAll]("")), gpo(Uint8Array),
    gpo([].values().map((x) => x)), gpo(Iterator.from({ next() {} })),
    gopd(Function.prototype, "caller"),
    (function () { return arguments; })(),
  ];
  const seen = new Set(), list = [], protos = [Object.prototype], stack = [];
  for (let i = 0; i < roots.length; i++) stack[stack.length] = roots[i];
  while (stack.length > 0) {
    const o = stack[stack.length - 1];
    stack.length--;
    if ((typeof o !== "object" && typeof o !== "function") || o === null || seen.has(o)) continue;
    seen.add(o);
    list[list.length] = o;
    stack[stack.length] = gpo(o);
    const keys = ownKeys(o);
    for (let i = 0; i < keys.length; i++) {
      const d = gopd(o, keys[i]);
      if ("value" in d) {
        if (keys[i] === "prototype" && typeof o === "function") protos[protos.length] = d.value;
        stack[stack.length] = d.value;
      } else {
        stack[stack.length] = d.get;
        stack[stack.length] = d.set;
      }
    }
  }
  // The override mistake: with a prototype's property frozen, assigning
  // a property of that name to an object that inherits it is refused
  // (this.name = "MyError" in an Error subclass). These properties become
  // accessors whose setter defines the property on the object assigned
  // to, as SES's lockdown does.
  const overridable = ["constructor", "toString", "valueOf", "toLocaleString", "toJSON", "name", "message"];
  const tamed = new Set();
  for (let i = 0; i < protos.length; i++) {
    const p = protos[i];
    if ((typeof p !== "object" && typeof p !== "function") || p === null || p === globalThis || tamed.has(p)) continue;
    tamed.add(p);
    for (let j = 0; j < overridable.length; j++) {
      const k = overridable[j];
      const d = gopd(p, k);
      if (!d || !("value" in d) || !d.configurable) continue;
      const value = d.value;
      const get = { [k]() { return value; } }[k];
      const set = { [k](v) {
        if (this === p) throw new TypeError("Cannot assign to read only property '" + k + "' of a built-in prototype");
        dp(this, k, { value: v, writable: true, enumerable: true, configurable: true });
      } }[k];
      dp(p, k, { get, set, enumerable: d.enumerable, configurable: false });
      freeze(get);
      freeze(set);
    }
  }
  for (let i = 0; i < list.length; i++) {
    if (list[i] !== globalThis) freeze(list[i]);
  }
  // The global object's own properties become read-only and permanent;
  // the object stays extensible, so that a script may still create
  // globals, which tidy deletes after the call.
  const base = new Set(), globals = ownKeys(globalThis);
  for (let i = 0; i < globals.length; i++) {
    const k = globals[i];
    base.add(k);
    if ("value" in gopd(globalThis, k)) dp(globalThis, k, { writable: false, configurable: false });
    else dp(globalThis, k, { configurable: false });
  }
  const globalProto = gpo(globalThis), size = globals.length;
  // tidy deletes the globals a call added and reports whether the global
  // object is as it was made.
  function tidy() {
    const keys = ownKeys(globalThis);
    if (keys.length !== size) {
      for (let i = 0; i < keys.length; i++) {
        if (!base.has(keys[i]) && !deleteProperty(globalThis, keys[i])) return false;
      }
    }
    return gpo(globalThis) === globalProto && isExtensible(globalThis);
  }

  // The outcome of a call, as one string. Its first character is a
  // digit, 1 when the realm must not be reused (marks was set, or the
  // expression itself threw); its second says what it is (r: a result,
  // its JSON after it; u: a result JSON cannot hold; p: a promise still
  // pending; e: an error, its JSON after it). The Go side then runs the
  // realm's jobs and, if any ran or the promise was pending, asks "end":
  // the digit again and the promise's outcome, if it settled. It checks
  // the global object's shape itself and asks "tidy" only when a call
  // changed it.
  function describe(v) {
    if (v === null) return "null";
    switch (typeof v) {
      case "undefined": return "undefined";
      case "object": return "an object";
      case "string": return "a string";
      case "number": return "a number";
      case "boolean": return "a boolean";
      case "symbol": return "a symbol";
      case "bigint": return "a bigint";
    }
    return "a " + typeof v;
  }
  // thrown renders what a script threw. Reading it may run script code
  // (a toString, a getter), under the call's deadline like the rest.
  function thrown(stage, e) {
    const t = { stage };
    if (e instanceof InternalError_) {
      const d = gopd(e, "message");
      const m = d && "value" in d ? d.value : "";
      if (m === "out of memory" || m === "string too long") t.engine = "memory";
      else if (m === "stack overflow") t.engine = "stack";
      // The engine's interrupt is an exception no script can catch, but
      // a built-in that closes an iterator as it unwinds (new Set(it))
      // throws it again as an ordinary one.
      else if (m === "interrupted") t.engine = "interrupted";
    }
    if (e === null) t.null = true;
    try {
      t.message = toStr(e);
    } catch (x) {
      t.message = null;
    }
    if (typeof e === "object" && e !== null) {
      try {
        const d = gopd(e, "stack");
        if (d && typeof d.value === "string") t.stack = d.value;
      } catch (x) {}
    }
    return "e" + stringify(t);
  }
  function encode(v) {
    let s;
    try {
      s = stringify(v, polled);
    } catch (e) {
      return thrown("encode", e);
    }
    return s === undefined ? "u" : "r" + s;
  }
  // pending holds the outcome of the call's promise once it settles.
  let pending = null;
  const digit = () => (marks === 0 ? "0" : "1");
  return function dispatch(op, factory, args) {
    switch (op) {
      case "call": {
        marks = 0;
        pending = null;
        let fn, v;
        try {
          fn = factory();
        } catch (e) {
          return "1" + thrown("script", e);
        }
        if (typeof fn !== "function") return digit() + "e" + stringify({ stage: "type", message: describe(fn) });
        try {
          v = args === undefined ? fn(undefined) : fn(parse(args));
        } catch (e) {
          return digit() + thrown("call", e);
        }
        if (typeof v === "object" && v !== null) {
          let isPromise = true;
          try {
            apply(then, v, [
              (r) => { pending = encode(r); },
              (e) => { pending = thrown("promise", e); },
            ]);
          } catch (e) {
            isPromise = false; // then throws a TypeError at once for what is not a promise
          }
          if (isPromise) return digit() + "p";
        }
        return digit() + encode(v);
      }
      case "end": {
        const p = pending;
        pending = null;
        return digit() + (p === null ? "" : p);
      }
      case "tidy":
        return tidy() ? "0" : "1";
    }
    return "";
  };
})
