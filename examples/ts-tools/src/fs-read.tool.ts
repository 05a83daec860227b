// fs.read: read a text file of the workspace. The twin of
// examples/tools/fsread.
import { z } from "zod";
import { tool, ToolError, utf8Decode } from "@brainrt/sdk";

export default tool({
  name: "fs.read",
  description: "Read a UTF-8 text file of the workspace.",
  input: z.object({ path: z.string().describe("the file to read, relative to the workspace") }).strict(),
  output: z.object({ text: z.string(), bytes: z.number().int() }),
  requires: ["fs"],
  async run({ handles }, { path }) {
    const b = await handles.fs.readFile(path);
    let text: string;
    try {
      text = utf8Decode(b);
    } catch {
      throw new ToolError("not_text", `${path} is not UTF-8 text; it has ${b.length} bytes`);
    }
    return { text, bytes: b.length };
  },
});
