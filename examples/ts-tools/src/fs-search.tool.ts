// fs.search: grep the workspace's text files. The twin of
// examples/tools/fssearch (a JavaScript regular expression instead of RE2).
import { z } from "zod";
import { CapabilityError, tool, ToolError, utf8Decode, utf8Encode, type FileInfo } from "@brainrt/sdk";
import { BadPattern, match } from "./lib/match.js";

const DEFAULT_MAX_MATCHES = 100;
const MAX_MAX_MATCHES = 1000;
const MAX_FILE_BYTES = 1 << 20;
const MAX_LINE_BYTES = 300;
const MAX_SKIPPED_LISTED = 20;
const MODE_TYPE = 0x8f280000; // Go's fs.ModeType bits

const Match = z.object({ path: z.string(), line: z.number().int(), text: z.string() });
const Skipped = z.object({ path: z.string(), reason: z.string() });

export default tool({
  name: "fs.search",
  description:
    "Search the workspace's text files for lines matching a regular expression (like grep -rn). Returns the path, line number and text of each match; binary and large files are skipped and listed.",
  input: z
    .object({
      pattern: z.string(),
      path: z.string().optional(),
      glob: z.string().optional(),
      ignore_case: z.boolean().optional(),
      max_matches: z.number().int().optional(),
    })
    .strict(),
  output: z.object({
    matches: z.array(Match),
    files_searched: z.number().int(),
    truncated: z.boolean(),
    skipped_files: z.number().int(),
    skipped: z.array(Skipped).optional(),
  }),
  requires: ["fs"],
  async run({ handles }, input) {
    let re: RegExp;
    try {
      re = new RegExp(input.pattern, input.ignore_case ? "i" : "");
    } catch (e) {
      throw new ToolError("invalid_pattern", `pattern ${JSON.stringify(input.pattern)} is not a valid regular expression: ${(e as Error).message}`);
    }
    const glob = input.glob ?? "";
    if (glob !== "") {
      for (const part of glob.split("/")) {
        if (part === "**") continue;
        try {
          match(part, "");
        } catch {
          throw new ToolError("invalid_glob", `glob ${JSON.stringify(glob)}: ${JSON.stringify(part)} is not a valid pattern (path.Match syntax: * ? [a-z] and \\ to escape)`);
        }
      }
    }
    let limit = input.max_matches ?? 0;
    if (limit === 0) limit = DEFAULT_MAX_MATCHES;
    else if (limit < 0 || limit > MAX_MAX_MATCHES) {
      throw new ToolError("invalid_argument", `max_matches is ${limit}; give a number from 1 to ${MAX_MAX_MATCHES}`);
    }
    const out = {
      matches: [] as { path: string; line: number; text: string }[],
      files_searched: 0,
      truncated: false,
      skipped_files: 0,
      skipped: undefined as { path: string; reason: string }[] | undefined,
    };
    const skip = (p: string, reason: string): void => {
      out.skipped_files++;
      out.skipped ??= [];
      if (out.skipped.length < MAX_SKIPPED_LISTED) out.skipped.push({ path: p, reason });
    };
    const ALL = {};
    try {
      await handles.fs.walk(input.path || ".", async (p: string, info: FileInfo) => {
        if (info.isDir) return info.name === ".git" ? handles.fs.SKIP_DIR : undefined;
        if ((info.mode & MODE_TYPE) !== 0 || (glob !== "" && !matchGlob(glob, p))) return undefined;
        if (info.size > MAX_FILE_BYTES) {
          skip(p, `larger than ${MAX_FILE_BYTES} bytes (${info.size} bytes)`);
          return undefined;
        }
        let b: Uint8Array;
        try {
          b = await handles.fs.readFile(p);
        } catch (e) {
          if (e instanceof CapabilityError && (e.code === "timeout" || e.code === "cancelled")) throw e;
          const ce = e as CapabilityError;
          skip(p, `${ce.handle} ${ce.op}: ${ce.message}`);
          return undefined;
        }
        let text: string;
        try {
          if (b.includes(0)) throw new Error("NUL");
          text = utf8Decode(b);
        } catch {
          skip(p, "binary (not UTF-8 text)");
          return undefined;
        }
        out.files_searched++;
        const lines = text.split("\n");
        for (let i = 0; i < lines.length; i++) {
          const line = lines[i]!.replace(/\r$/, "");
          if (!re.test(line)) continue;
          if (out.matches.length === limit) {
            out.truncated = true;
            throw ALL;
          }
          out.matches.push({ path: p, line: i + 1, text: cut(line) });
        }
        return undefined;
      });
    } catch (e) {
      if (e !== ALL) throw e;
    }
    const { skipped, ...rest } = out;
    return skipped === undefined ? rest : { ...rest, skipped };
  },
});

// cut shortens a line to MAX_LINE_BYTES bytes of UTF-8, at a character
// boundary, and marks the cut.
function cut(s: string): string {
  const b = utf8Encode(s);
  if (b.length <= MAX_LINE_BYTES) return s;
  let n = MAX_LINE_BYTES;
  while (n > 0 && (b[n]! & 0xc0) === 0x80) n--;
  return utf8Decode(b.subarray(0, n)) + "…";
}

function matchGlob(glob: string, p: string): boolean {
  try {
    if (!glob.includes("/")) return match(glob, p.slice(p.lastIndexOf("/") + 1));
    return matchParts(glob.split("/"), p.split("/"));
  } catch (e) {
    if (e instanceof BadPattern) return false;
    throw e;
  }
}

function matchParts(glob: string[], parts: string[]): boolean {
  while (glob.length > 0) {
    if (glob[0] === "**") {
      const rest = glob.slice(1);
      for (let i = 0; i <= parts.length; i++) if (matchParts(rest, parts.slice(i))) return true;
      return false;
    }
    if (parts.length === 0 || !match(glob[0]!, parts[0]!)) return false;
    glob = glob.slice(1);
    parts = parts.slice(1);
  }
  return parts.length === 0;
}
