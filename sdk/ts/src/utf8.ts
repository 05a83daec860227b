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

/**
 * utf8Encode encodes a string as UTF-8 (lone surrogates become U+FFFD),
 * into a Uint8Array sized by a first pass: a number[] would take about 16
 * bytes of the realm's memory a byte.
 */
export function utf8Encode(s: string): Uint8Array {
  const len = s.length;
  let n = 0;
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < len && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  const out = new Uint8Array(n);
  let j = 0;
  for (let i = 0; i < len; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      out[j++] = c;
      continue;
    }
    if (c < 0x800) {
      out[j++] = 0xc0 | (c >> 6);
      out[j++] = 0x80 | (c & 63);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      if (c <= 0xdbff && i + 1 < len && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
        c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00);
        out[j++] = 0xf0 | (c >> 18);
        out[j++] = 0x80 | ((c >> 12) & 63);
        out[j++] = 0x80 | ((c >> 6) & 63);
        out[j++] = 0x80 | (c & 63);
        continue;
      }
      c = 0xfffd;
    }
    out[j++] = 0xe0 | (c >> 12);
    out[j++] = 0x80 | ((c >> 6) & 63);
    out[j++] = 0x80 | (c & 63);
  }
  return out;
}
