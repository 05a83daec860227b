// exec.run: run one allow-listed program with the exec handle. The twin
// of examples/tools/execrun.
import { z } from "zod";
import { tool, ToolError } from "@brainrt/sdk";
import { decodeLossy } from "./lib/json.js";

export default tool({
  name: "exec.run",
  description:
    "Run one allow-listed program with arguments (no shell) in the workspace and return its exit code, standard output and standard error. A program not on the allow-list fails with denied.",
  input: z
    .object({
      program: z.string().describe("the program to run: a name on the environment's allow-list, such as git or go; there is no shell"),
      args: z.array(z.string()).optional(),
      dir: z.string().optional(),
      stdin: z.string().optional(),
      timeout_ms: z.number().int().optional(),
    })
    .strict(),
  output: z.object({ exit_code: z.number().int(), stdout: z.string(), stderr: z.string(), truncated: z.boolean() }),
  requires: ["exec"],
  async run({ handles }, input) {
    const timeout = input.timeout_ms ?? 0;
    if (timeout < 0) {
      throw new ToolError("invalid_argument", `timeout_ms is ${timeout}; give a positive number of milliseconds, or 0 for the environment's deadline`);
    }
    const r = await handles.exec.run({
      program: input.program,
      ...(input.args !== undefined && { args: input.args }),
      ...(input.dir !== undefined && { dir: input.dir }),
      ...(input.stdin ? { stdin: input.stdin } : {}),
      timeoutMs: timeout,
    });
    return { exit_code: r.exitCode, stdout: decodeLossy(r.stdout), stderr: decodeLossy(r.stderr), truncated: r.truncated };
  },
});
