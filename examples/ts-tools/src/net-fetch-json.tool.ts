// net.fetch_json: GET a URL and return its JSON body. The twin of
// examples/tools/netfetchjson.
import { z } from "zod";
import { tool, ToolError } from "@brainrt/sdk";
import { decodeLossy, header, isJSON, mediaType, parseOne, preview } from "./lib/json.js";

export default tool({
  name: "net.fetch_json",
  description:
    "GET a URL and return its JSON body and HTTP status. Fails with not_json when the response is not JSON, and with denied when the environment does not allow the host.",
  input: z.object({ url: z.string().describe("the absolute http or https URL to GET, e.g. https://api.example.com/v1/items") }).strict(),
  output: z.object({ status: z.number().int(), url: z.string(), json: z.unknown() }),
  requires: ["net"],
  async run({ handles }, { url }) {
    const resp = await handles.net.fetch({ url, header: { Accept: ["application/json"] } });
    const ct = header(resp.header, "Content-Type");
    const mt = mediaType(ct);
    if (!isJSON(mt)) {
      throw new ToolError("not_json", `${resp.url} answered HTTP ${resp.status} with Content-Type "${ct}", not JSON; the body starts: ${preview(resp.body)}`);
    }
    const r = parseOne(decodeLossy(resp.body));
    if (!r.ok && r.more) {
      throw new ToolError("not_json", `${resp.url} answered HTTP ${resp.status} with more than one JSON value in the body; it starts: ${preview(resp.body)}`);
    }
    if (!r.ok) {
      throw new ToolError("not_json", `${resp.url} answered HTTP ${resp.status} with Content-Type ${mt}, but the body is not valid JSON (${r.error}); it starts: ${preview(resp.body)}`);
    }
    return { status: resp.status, url: resp.url, json: r.value };
  },
});
