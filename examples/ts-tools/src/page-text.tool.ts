// page.text: the visible text of a page's element. The twin of
// examples/tools/pagetext.
import { z } from "zod";
import { tool, ToolError } from "@brainrt/sdk";

const DEFAULT_MAX_CHARS = 20000;

export default tool({
  name: "page.text",
  description:
    "Load a web page in a headless browser and return the visible text of the first element matching a CSS selector (or of the whole page). Fails with not_found when nothing matches, and with denied when the environment does not allow the host.",
  input: z.object({ url: z.string(), selector: z.string().optional(), max_chars: z.number().int().optional() }).strict(),
  output: z.object({ text: z.string(), truncated: z.boolean() }),
  requires: ["page"],
  async run({ handles }, input) {
    let limit = input.max_chars ?? 0;
    if (limit === 0) limit = DEFAULT_MAX_CHARS;
    else if (limit < 0) throw new ToolError("invalid_argument", `max_chars is ${limit}; give a positive number, or 0 for ${DEFAULT_MAX_CHARS}`);
    await handles.page.navigate(input.url);
    const text = await handles.page.text(input.selector ?? "");
    const chars = [...text]; // code points, as Go counts runes
    if (chars.length <= limit) return { text, truncated: false };
    return { text: chars.slice(0, limit).join(""), truncated: true };
  },
});
