// path.Match of Go's standard library, for globs: the twin of the matching
// examples/tools/fssearch does.

/** BadPattern is what match throws for a malformed pattern, as Go's path.ErrBadPattern. */
export class BadPattern extends Error {}

/** match reports whether name matches the shell pattern (Go's path.Match). */
export function match(pattern: string, name: string): boolean {
  Pattern: while (pattern.length > 0) {
    let star = false;
    let chunk: string;
    [star, chunk, pattern] = scanChunk(pattern);
    if (star && chunk === "") return !name.includes("/");
    let [t, ok] = matchChunk(chunk, name);
    if (ok && (t.length === 0 || pattern.length > 0)) {
      name = t;
      continue;
    }
    if (star) {
      for (let i = 0; i < name.length && name[i] !== "/"; i++) {
        [t, ok] = matchChunk(chunk, name.slice(i + 1));
        if (ok) {
          if (pattern.length === 0 && t.length > 0) continue;
          name = t;
          continue Pattern;
        }
      }
    }
    while (pattern.length > 0) {
      [, chunk, pattern] = scanChunk(pattern);
      matchChunk(chunk, ""); // throws BadPattern for a malformed rest
    }
    return false;
  }
  return name.length === 0;
}

function scanChunk(pattern: string): [boolean, string, string] {
  let star = false;
  while (pattern.length > 0 && pattern[0] === "*") {
    pattern = pattern.slice(1);
    star = true;
  }
  let inrange = false;
  let i = 0;
  Scan: for (; i < pattern.length; i++) {
    switch (pattern[i]) {
      case "\\":
        if (i + 1 < pattern.length) i++;
        break;
      case "[":
        inrange = true;
        break;
      case "]":
        inrange = false;
        break;
      case "*":
        if (!inrange) break Scan;
    }
  }
  return [star, pattern.slice(0, i), pattern.slice(i)];
}

function matchChunk(chunk: string, s: string): [string, boolean] {
  let failed = false;
  const chars = (x: string): string[] => [...x];
  let c = chars(chunk);
  let str = chars(s);
  while (c.length > 0) {
    if (!failed && str.length === 0) failed = true;
    switch (c[0]) {
      case "[": {
        let r = "";
        if (!failed) {
          r = str[0]!;
          str = str.slice(1);
        }
        c = c.slice(1);
        let negated = false;
        if (c.length > 0 && c[0] === "^") {
          negated = true;
          c = c.slice(1);
        }
        let matched = false;
        let nrange = 0;
        for (;;) {
          if (c.length > 0 && c[0] === "]" && nrange > 0) {
            c = c.slice(1);
            break;
          }
          let lo: string, hi: string;
          [lo, c] = getEsc(c);
          hi = lo;
          if (c[0] === "-") {
            [hi, c] = getEsc(c.slice(1));
          }
          if (lo <= r && r <= hi) matched = true;
          nrange++;
        }
        if (matched === negated) failed = true;
        break;
      }
      case "?":
        if (!failed) {
          if (str[0] === "/") failed = true;
          str = str.slice(1);
        }
        c = c.slice(1);
        break;
      case "\\":
        c = c.slice(1);
        if (c.length === 0) throw new BadPattern("syntax error in pattern");
      // falls through
      default:
        if (!failed) {
          if (c[0] !== str[0]) failed = true;
          str = str.slice(1);
        }
        c = c.slice(1);
    }
  }
  if (failed) return ["", false];
  return [str.join(""), true];
}

function getEsc(c: string[]): [string, string[]] {
  if (c.length === 0 || c[0] === "-" || c[0] === "]") throw new BadPattern("syntax error in pattern");
  if (c[0] === "\\") {
    c = c.slice(1);
    if (c.length === 0) throw new BadPattern("syntax error in pattern");
  }
  const r = c[0]!;
  c = c.slice(1);
  if (c.length === 0) throw new BadPattern("syntax error in pattern");
  return [r, c];
}
