// The official TypeScript SDK's client against `mcp-harness serve`: connects (stdio: spawns
// the command after `--`; http: the URL after `--`), lists the tools, calls `ECHO_TOOL`, calls
// `CONFIRM_TOOL` answering the approval form through its elicitation handler, optionally
// changes the configuration file under the gateway (SERVE_NEXT_CONFIG, SERVE_PREV_CONFIG) and
// waits for `list_changed`, and prints one JSON line of what it saw. Used by crates/cli/tests/serve_peers.rs (MCP_PEERS_DIR: the
// peers `cargo xtask test` installs, whose node_modules hold the SDK).
import { createRequire } from "node:module";
import path from "node:path";

const peers = process.env.MCP_PEERS_DIR;
if (!peers) { console.error("MCP_PEERS_DIR is not set"); process.exit(2); }
const req = createRequire(path.join(peers, "node", "package.json"));
const { Client } = await import(req.resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StdioClientTransport } = await import(req.resolve("@modelcontextprotocol/sdk/client/stdio.js"));
const { StreamableHTTPClientTransport } = await import(req.resolve("@modelcontextprotocol/sdk/client/streamableHttp.js"));
const { ElicitRequestSchema, ToolListChangedNotificationSchema } = await import(req.resolve("@modelcontextprotocol/sdk/types.js"));

const [mode, echoTool, confirmTool, dd, ...target] = process.argv.slice(2);
if (dd !== "--" || !target.length) { console.error("usage: ts_client.mjs stdio|http ECHO CONFIRM -- CMD...|URL"); process.exit(2); }
const transport = mode === "http"
  ? new StreamableHTTPClientTransport(new URL(target[0]))
  : new StdioClientTransport({ command: target[0], args: target.slice(1), stderr: "inherit", env: process.env });
const client = new Client({ name: "ts-sdk-test", version: "1.0.0" }, { capabilities: { elicitation: {} } });
const forms = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  forms.push(request.params.message);
  return { action: "accept", content: { decision: "yes" } };
});
let listChanged = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => { listChanged += 1; });
await client.connect(transport);
const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  tools.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor);
const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
const echoed = await client.callTool({ name: echoTool, arguments: { text: "from the TypeScript SDK" } });
const confirmed = await client.callTool({ name: confirmTool, arguments: { a: 2, b: 40 } });
// With SERVE_NEXT_CONFIG, that file is renamed over SERVE_CONFIG (a server added while the
// client is connected): the client waits for list_changed and lists again until the listing
// differs. With SERVE_PREV_CONFIG too, that one is renamed over it next (the server removed).
const fs = await import("node:fs");
const afterRename = async (file, known) => {
  const before = listChanged;
  fs.renameSync(file, process.env.SERVE_CONFIG);
  const deadline = Date.now() + 20000;
  while (Date.now() < deadline) {
    if (listChanged > before) {
      const names = (await client.listTools()).tools.map((t) => t.name);
      if (names.length !== known.length) return names;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return null;
};
let afterChange = null;
let afterRemoval = null;
if (process.env.SERVE_NEXT_CONFIG) {
  afterChange = await afterRename(process.env.SERVE_NEXT_CONFIG, tools);
  if (afterChange && process.env.SERVE_PREV_CONFIG) {
    afterRemoval = await afterRename(process.env.SERVE_PREV_CONFIG, afterChange);
  }
}
console.log(JSON.stringify({
  afterChange,
  afterRemoval,
  server: client.getServerVersion()?.name,
  protocol: transport.protocolVersion ?? null,
  tools,
  echo: text(echoed),
  echoError: echoed.isError ?? false,
  confirmed: text(confirmed),
  confirmedError: confirmed.isError ?? false,
  forms,
  listChanged,
}));
await client.close();
