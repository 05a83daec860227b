// js.eval: call a JavaScript function on JSON arguments with the js
// handle. The twin of examples/tools/jseval.
import { z } from "zod";
import { tool } from "@brainrt/sdk";

export default tool({
  name: "js.eval",
  description:
    "Call a JavaScript function expression, such as (args) => args.items.length, on a JSON argument and return its result as JSON. Only the language and its built-ins are available.",
  input: z
    .object({
      source: z.string().describe("a JavaScript function expression, called with args as its one argument, e.g. (args) => args.a + args.b"),
      args: z.unknown().optional().describe("the JSON value passed to the function; default null"),
    })
    .strict(),
  output: z.object({ result: z.unknown() }),
  requires: ["js"],
  async run({ handles }, { source, args }) {
    return { result: (await handles.js.call(source, args ?? null)) ?? null };
  },
});
