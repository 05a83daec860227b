// JSON helpers the net tools share: the twin of examples/tools/internal/jsonbody.

/** header returns the first value of the header name (case-insensitive), or "". */
export function header(h: Readonly<Record<string, readonly string[]>>, name: string): string {
  for (const [k, v] of Object.entries(h)) {
    if (k.toLowerCase() === name.toLowerCase() && v.length > 0) return v[0]!;
  }
  return "";
}

/** mediaType returns the media type of a Content-Type value, lower-cased, without parameters. */
export function mediaType(contentType: string): string {
  return contentType.split(";")[0]!.trim().toLowerCase();
}

/** isJSON reports whether a media type is JSON: application/json or any +json. */
export function isJSON(mt: string): boolean {
  return mt === "application/json" || mt.endsWith("+json");
}

const PREVIEW_BYTES = 120;

/** preview quotes the start of a body, as Go's %q does, for error messages. */
export function preview(b: Uint8Array): string {
  if (b.length === 0) return "(empty)";
  let n = Math.min(b.length, PREVIEW_BYTES);
  while (n < b.length && n > 0 && (b[n]! & 0xc0) === 0x80) n--;
  const s = decodeLossy(b.subarray(0, n));
  return n < b.length ? goQuote(s) + "…" : goQuote(s);
}

// decodeLossy decodes UTF-8, one U+FFFD for each run of invalid bytes, as
// Go's strings.ToValidUTF8 does.
export function decodeLossy(b: Uint8Array): string {
  let out = "";
  let bad = false;
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    const n = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
    let cp = n === 1 ? c : n === 2 ? c & 0x1f : n === 3 ? c & 0x0f : c & 0x07;
    let ok = n > 0 && i + n <= b.length;
    for (let k = 1; ok && k < n; k++) {
      const d = b[i + k]!;
      if ((d & 0xc0) !== 0x80) ok = false;
      else cp = (cp << 6) | (d & 0x3f);
    }
    if (ok && ((n === 3 && cp < 0x800) || (n === 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
    if (!ok) {
      if (!bad) out += "\ufffd";
      bad = true;
      i++;
      continue;
    }
    bad = false;
    out += String.fromCodePoint(cp);
    i += n;
  }
  return out;
}

/** goQuote quotes s as Go's strconv.Quote does for the characters bodies hold. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    switch (ch) {
      case '"': out += '\\"'; continue;
      case "\\": out += "\\\\"; continue;
      case "\n": out += "\\n"; continue;
      case "\r": out += "\\r"; continue;
      case "\t": out += "\\t"; continue;
      case "\x07": out += "\\a"; continue;
      case "\b": out += "\\b"; continue;
      case "\f": out += "\\f"; continue;
      case "\v": out += "\\v"; continue;
    }
    if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + '"';
}

type RawJSON = { readonly rawJSON: string };
const J = JSON as unknown as {
  rawJSON(text: string): RawJSON;
  parse(text: string, reviver: (key: string, value: unknown, context: { source?: string }) => unknown): unknown;
};

/**
 * parseExact parses JSON keeping every number exactly as written (as Go's
 * json.Decoder.UseNumber does): a number is carried as its source text
 * (JSON.rawJSON), so 9007199254740993 and 2.50 come back unchanged.
 */
export function parseExact(text: string): unknown {
  return J.parse(text, (_k, v, c) => (typeof v === "number" && c?.source !== undefined ? J.rawJSON(c.source) : v));
}

/**
 * parseOne parses text holding one JSON value; more says that a value was
 * followed by more data, which Go's json.Decoder reports as "more than
 * one JSON value".
 */
export function parseOne(text: string): { ok: true; value: unknown } | { ok: false; error: string; more: boolean } {
  try {
    return { ok: true, value: parseExact(text) };
  } catch (e) {
    const error = e instanceof Error ? e.message : String(e);
    return { ok: false, error, more: error === "unexpected data at the end" };
  }
}

const isRaw = (JSON as unknown as { isRawJSON(v: unknown): boolean }).isRawJSON;

/** mapStrings returns v with f applied to every string and object key (numbers kept exactly). */
export function mapStrings(v: unknown, f: (s: string) => string): unknown {
  if (typeof v === "string") return f(v);
  if (v === null || typeof v !== "object" || isRaw(v)) return v;
  if (Array.isArray(v)) return v.map((x) => mapStrings(x, f));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[f(k)] = mapStrings(x, f);
  return out;
}
