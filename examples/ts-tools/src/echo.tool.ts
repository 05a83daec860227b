// echo returns its input: the TypeScript twin of the Go echo artifact the
// benchmarks measure (host's BenchmarkEchoArtifact). Its schemas use
// zod/mini, which keeps the bundle (and each session's realm) small.
import * as z from "zod/mini";
import { tool } from "@brainrt/sdk";

export default tool({
  name: "echo",
  description: "Return the message it is given.",
  input: z.object({ message: z.string() }),
  output: z.object({ message: z.string() }),
  requires: [],
  run: (_ctx, { message }) => ({ message }),
});
