import { CapabilityError } from "../../../clients/ts/src/handles.js";

/**
 * utf8Decode decodes UTF-8 bytes (what fs.readFile and exec return) to a
 * string. brain's JavaScript engine has no TextDecoder. With fatal (the
 * default), bytes that are not UTF-8 throw a CapabilityError with code
 * invalid_argument; without it they become U+FFFD.
 */
export function utf8Decode(b: Uint8Array, opts: { fatal?: boolean } = {}): string {
  const fatal = opts.fatal ?? true;
  let out = "";
  let chunk: number[] = [];
  const bad = (i: number): void => {
    if (fatal) throw new CapabilityError("invalid_argument", `the bytes are not UTF-8 (at offset ${i})`);
    chunk.push(0xfffd);
  };
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    let cp = -1;
    let n = 0;
    if (c < 0x80) {
      cp = c;
      n = 1;
    } else if (c >= 0xc2 && c < 0xe0) {
      n = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c < 0xf0) {
      n = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c < 0xf5) {
      n = 4;
      cp = c & 0x07;
    }
    if (n === 0 || i + n > b.length) {
      bad(i);
      i++;
      continue;
    }
    let ok = true;
    for (let k = 1; k < n; k++) {
      const d = b[i + k]!;
      if ((d & 0xc0) !== 0x80) {
        ok = false;
        break;
      }
      cp = (cp << 6) | (d & 0x3f);
    }
    if (!ok || (n === 3 && cp < 0x800) || (n === 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) {
      bad(i);
      i++;
      continue;
    }
    chunk.push(cp);
    i += n;
    if (chunk.length >= 4096) {
      out += String.fromCodePoint(...chunk);
      chunk = [];
    }
  }
  return out + String.fromCodePoint(...chunk);
}

/** utf8Encode encodes a string as UTF-8 (lone surrogates become U+FFFD). */
export function utf8Encode(s: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    let c = s.codePointAt(i)!;
    if (c > 0xffff) i++;
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return new Uint8Array(out);
}
