// A small MCP server on stdio, on the TypeScript SDK's low-level Server, for
// what the reference servers do not show: tools listed in pages, log
// messages at every level on demand, and the reason a cancelled call was
// given.
//
//   node fixture-server.mjs
//
// Tools: "log" sends one message at each level and answers; "wait" answers
// only when cancelled (never, in practice); "last-cancel" answers with the
// reason the last cancelled "wait" was given; "filler-NN" echo their name.
// tools/list gives PAGE tools a page.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const PAGE = 5;
const LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

const tools = ["log", "wait", "last-cancel"].map((name) => ({ name, description: `fixture tool ${name}`, inputSchema: { type: "object" } }));
for (let i = tools.length; i < 23; i++) {
  const name = `filler-${String(i).padStart(2, "0")}`;
  tools.push({ name, description: `fixture tool ${name}`, inputSchema: { type: "object" } });
}

const server = new Server(
  { name: "toolcas-fixture", version: "1.0.0" },
  { capabilities: { tools: {}, logging: {} }, instructions: "A fixture server: tools in pages, logs on demand, cancellation reasons kept." },
);

server.setRequestHandler(ListToolsRequestSchema, async (req) => {
  const start = req.params?.cursor ? Number(req.params.cursor) : 0;
  if (!Number.isInteger(start) || start < 0 || start >= tools.length) {
    throw new Error(`bad cursor ${req.params?.cursor}`);
  }
  const page = { tools: tools.slice(start, start + PAGE) };
  if (start + PAGE < tools.length) page.nextCursor = String(start + PAGE);
  return page;
});

let lastCancel = "(none)";

server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
  const name = req.params.name;
  switch (name) {
    case "log":
      for (const level of LEVELS) {
        await server.sendLoggingMessage({ level, logger: "fixture", data: `a ${level} message` });
      }
      return { content: [{ type: "text", text: "logged" }] };
    case "wait":
      return await new Promise((resolve) => {
        extra.signal.addEventListener("abort", () => {
          lastCancel = String(extra.signal.reason);
          resolve({ content: [{ type: "text", text: "cancelled" }] });
        });
      });
    case "last-cancel":
      return { content: [{ type: "text", text: lastCancel }] };
    default:
      if (tools.some((t) => t.name === name)) return { content: [{ type: "text", text: name }] };
      return { content: [{ type: "text", text: `no tool ${name} here` }], isError: true };
  }
});

await server.connect(new StdioServerTransport());
