// api.get: GET a path of a configured HTTP API, authenticated with a
// bearer token bound at attach. The twin of examples/tools/apicall.
import { z } from "zod";
import { CapabilityError, tool, ToolError } from "@brainrt/sdk";
import { decodeLossy, header, isJSON, mapStrings, mediaType, parseOne, preview } from "./lib/json.js";

export const REDACTED = "[redacted]";

export default tool({
  name: "api.get",
  description: "GET a path of the configured HTTP API (authenticated for you) and return the HTTP status and the JSON body.",
  input: z.object({ path: z.string() }).strict(),
  output: z.object({ status: z.number().int(), json: z.unknown() }),
  requires: ["net"],
  bindings: {
    token: z.string().describe("the bearer token sent in the Authorization header"),
    base_url: z.string().describe("the API's base URL: http or https, a host and an optional path, such as https://api.example.com/v1"),
  },
  init({ bindings }) {
    if (bindings.token === "") throw new ToolError("invalid_binding", "the token binding is empty");
    if (/[\r\n\0]/.test(bindings.token)) throw new ToolError("invalid_binding", "the token binding contains a line break or NUL");
    baseURL(bindings.base_url);
  },
  async run({ handles, bindings }, { path }) {
    const r = (s: string): string => (bindings.token === "" ? s : s.split(bindings.token).join(REDACTED));
    try {
      const url = target(bindings.base_url, path);
      const resp = await handles.net.fetch({ url, header: { Authorization: ["Bearer " + bindings.token], Accept: ["application/json"] } });
      const body = r(decodeLossy(resp.body));
      const bodyBytes = new TextBytes(body);
      const ct = header(resp.header, "Content-Type");
      if (!isJSON(mediaType(ct))) {
        throw new ToolError("not_json", `GET ${path} answered HTTP ${resp.status} with Content-Type "${ct}", not JSON; the body starts: ${preview(bodyBytes.bytes)}`);
      }
      const v = parseOne(body);
      if (!v.ok) {
        throw new ToolError("not_json", `GET ${path} answered HTTP ${resp.status} with a JSON Content-Type, but the body is not one JSON value; it starts: ${preview(bodyBytes.bytes)}`);
      }
      return { status: resp.status, json: mapStrings(v.value, r) };
    } catch (e) {
      if (e instanceof CapabilityError) throw new CapabilityError(e.code, r(e.message), withWhere(e));
      if (e instanceof ToolError) throw new ToolError(e.code, r(e.message));
      throw new Error(r(String((e as Error)?.message ?? e)));
    }
  },
});

function withWhere(e: CapabilityError): { handle?: NonNullable<CapabilityError["handle"]>; op?: string } {
  return { ...(e.handle !== undefined && { handle: e.handle }), ...(e.op !== undefined && { op: e.op }) };
}

// TextBytes carries a string's UTF-8 bytes, for preview.
class TextBytes {
  readonly bytes: Uint8Array;
  constructor(s: string) {
    const out: number[] = [];
    for (const ch of s) {
      const c = ch.codePointAt(0)!;
      if (c < 0x80) out.push(c);
      else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
      else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    }
    this.bytes = new Uint8Array(out);
  }
}

interface URLParts {
  scheme: string;
  user: boolean;
  host: string;
  path: string;
  query: string;
  fragment: string;
}

// parse splits an absolute URL as Go's net/url does for the shapes the
// tool accepts (no URL class in brain's engine).
function parse(s: string): URLParts {
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/.exec(s);
  if (m === null) return { scheme: /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(s)?.[1]?.toLowerCase() ?? "", user: false, host: "", path: s, query: "", fragment: "" };
  const auth = m[2]!;
  return { scheme: m[1]!.toLowerCase(), user: auth.includes("@"), host: auth.slice(auth.lastIndexOf("@") + 1), path: m[3]!, query: (m[4] ?? "").slice(1), fragment: (m[5] ?? "").slice(1) };
}

function baseURL(s: string): URLParts {
  const u = parse(s);
  if (u.scheme !== "http" && u.scheme !== "https") throw new ToolError("invalid_binding", `base_url ${JSON.stringify(s)}: want an http or https URL`);
  if (u.host === "") throw new ToolError("invalid_binding", `base_url ${JSON.stringify(s)} has no host`);
  if (u.user || u.query !== "" || u.fragment !== "") {
    throw new ToolError("invalid_binding", `base_url ${JSON.stringify(s)}: give a scheme, host and path only (no user, query or fragment)`);
  }
  return u;
}

function target(base: string, p: string): string {
  const b = baseURL(base);
  if (!p.startsWith("/") || p.startsWith("//")) throw new ToolError("invalid_path", `path ${JSON.stringify(p)} must start with a single /, such as /items`);
  const hash = p.indexOf("#");
  if (hash >= 0) throw new ToolError("invalid_path", `path ${JSON.stringify(p)} must be a path with an optional query, nothing else`);
  const q = p.indexOf("?");
  const rawPath = q >= 0 ? p.slice(0, q) : p;
  const query = q >= 0 ? p.slice(q + 1) : "";
  let path: string;
  try {
    path = decodeURIComponent(rawPath);
  } catch {
    throw new ToolError("invalid_path", `path ${JSON.stringify(p)} does not parse: invalid URL escape`);
  }
  for (const seg of path.split("/")) {
    if (seg === "." || seg === "..") throw new ToolError("invalid_path", `path ${JSON.stringify(p)} has a ${JSON.stringify(seg)} segment; name the resource directly`);
  }
  const basePath = b.path.endsWith("/") ? b.path.slice(0, -1) : b.path;
  const full = encodePath(basePath + path);
  return `${b.scheme}://${b.host}${full}${query !== "" ? "?" + query : ""}`;
}

// encodePath escapes a path as Go's url.URL.String does (EscapedPath).
function encodePath(p: string): string {
  return p.replace(/[^A-Za-z0-9\-._~!$&'()*+,;=:@/]/g, (c) => encodeURIComponent(c));
}
