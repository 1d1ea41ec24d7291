// The proxy is invisible: what an MCP client and server do directly, they
// do the same through `casctl mcp proxy` (offloading set so high that no
// result is touched). Each item runs twice, directly and through the
// proxy, with the same TypeScript SDK client, and the two are compared.
//
//   CASCTL=/path/to/casctl node --test
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

import { casctl, everything, filesystem, here, READ, DEADLINE_MS, tmpdir, descendants, waitGone, freePort, waitFor } from "./lib.mjs";

const fixture = path.join(here, "fixture-server.mjs");

// A client that can do everything a server may ask of it, and keeps what
// it was asked and what it heard.
function newClient(name, roots) {
  const c = new Client({ name, version: "1.0.0" }, { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } });
  c.seen = { sampling: [], elicitation: [], logs: [] };
  c.roots = roots;
  c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    c.seen.sampling.push({ messages: req.params.messages, maxTokens: req.params.maxTokens });
    const asked = req.params.messages.map((m) => m.content.text).join(" ");
    return { model: "scripted", role: "assistant", content: { type: "text", text: `sampled: ${asked}` }, stopReason: "endTurn" };
  });
  c.setRequestHandler(ElicitRequestSchema, async (req) => {
    c.seen.elicitation.push({ message: req.params.message, fields: Object.keys(req.params.requestedSchema.properties).sort() });
    return { action: "decline" };
  });
  c.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: c.roots }));
  c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { c.seen.logs.push(n.params); });
  return c;
}

// connect starts command with args (directly, or behind the proxy when
// proxied) and connects a new client to it.
async function connect(t, { proxied, command, args, roots = [] }) {
  const full = proxied
    ? [casctl, ["--store", tmpdir(t), "mcp", "proxy", "--quiet", "--offload", "*=over:100000000", "--", command, ...args]]
    : [command, args];
  const transport = new StdioClientTransport({ command: full[0], args: full[1], stderr: "pipe" });
  let stderr = "";
  transport.stderr.on("data", (b) => { stderr += b; });
  const client = newClient(proxied ? "through-proxy" : "direct", roots);
  try {
    await client.connect(transport);
  } catch (e) {
    throw new Error(`connect ${full.flat().join(" ")}: ${e.message}; stderr: ${stderr}`);
  }
  t.after(() => client.close());
  client.pid = transport.pid;
  return client;
}

// both runs fn against a client connected directly and one connected
// through the proxy, and returns the two answers.
async function both(t, server, fn) {
  const out = [];
  for (const proxied of [false, true]) {
    out.push(await fn(await connect(t, { ...server, proxied }), proxied));
  }
  return out;
}

const everythingServer = { command: process.execPath, args: [everything, "stdio"] };
const fixtureServer = { command: process.execPath, args: [fixture] };

// until polls fn until it returns a truthy value, failing past the deadline.
async function until(fn, what) {
  const end = Date.now() + DEADLINE_MS;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) assert.fail(`${what}: not within ${DEADLINE_MS} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("server instructions pass", async (t) => {
  for (const server of [everythingServer, fixtureServer]) {
    const [direct, proxied] = await both(t, server, async (c) => c.getInstructions());
    assert.ok(direct && direct.length > 40, `the server gives instructions: ${direct}`);
    assert.equal(proxied, direct);
  }
});

test("sampling: the upstream's request reaches the client, its answer the upstream", async (t) => {
  const [direct, proxied] = await both(t, everythingServer, async (c) => {
    const res = await c.callTool({ name: "trigger-sampling-request", arguments: { prompt: "say hi", maxTokens: 20 } });
    return { res, asked: c.seen.sampling };
  });
  assert.equal(direct.asked.length, 1, "the client was asked once");
  assert.match(JSON.stringify(direct.res), /sampled: /);
  assert.deepEqual(proxied, direct);
});

test("elicitation: the upstream's request reaches the client, its answer the upstream", async (t) => {
  const [direct, proxied] = await both(t, everythingServer, async (c) => {
    const res = await c.callTool({ name: "trigger-elicitation-request", arguments: {} });
    return { res, asked: c.seen.elicitation };
  });
  assert.equal(direct.asked.length, 1, "the client was asked once");
  assert.deepEqual(proxied, direct);
});

test("roots: the upstream lists the client's roots", async (t) => {
  const roots = [{ uri: pathToFileURL(fs.realpathSync(tmpdir(t))).href, name: "work" }];
  const [direct, proxied] = await both(t, { ...everythingServer, roots }, async (c) => {
    c.roots = roots;
    return c.callTool({ name: "get-roots-list", arguments: {} });
  });
  assert.match(JSON.stringify(direct), /work/);
  assert.deepEqual(proxied, direct);
});

test("roots: server-filesystem started with no directories reads in the client's roots, and follows a change", async (t) => {
  const a = fs.realpathSync(tmpdir(t));
  const b = fs.realpathSync(tmpdir(t));
  fs.writeFileSync(path.join(a, "a.txt"), "in root a");
  fs.writeFileSync(path.join(b, "b.txt"), "in root b");
  const c = await connect(t, { proxied: true, command: process.execPath, args: [filesystem], roots: [{ uri: pathToFileURL(a).href, name: "a" }] });
  const read = async (file) => {
    const res = await c.callTool({ name: "read_text_file", arguments: { path: file } });
    return res.isError ? `error: ${res.content[0].text}` : res.content[0].text;
  };
  // The server asks for the roots once the session is initialised.
  await until(async () => (await read(path.join(a, "a.txt"))) === "in root a", "reading a.txt in the client's root");
  assert.match(await read(path.join(b, "b.txt")), /^error: .*denied/i, "outside the roots");
  c.roots = [{ uri: pathToFileURL(b).href, name: "b" }];
  await c.sendRootsListChanged();
  await until(async () => (await read(path.join(b, "b.txt"))) === "in root b", "reading b.txt after the roots changed");
});

test("logging: setLevel reaches the upstream, its messages reach the client", async (t) => {
  const [direct, proxied] = await both(t, fixtureServer, async (c) => {
    await c.setLoggingLevel("warning");
    const res = await c.callTool({ name: "log", arguments: {} });
    // Five levels from warning up: the fixture sends them before it answers.
    await until(() => c.seen.logs.length >= 5, "five log messages");
    return { res, logs: c.seen.logs };
  });
  assert.deepEqual(direct.logs.map((l) => l.level), ["warning", "error", "critical", "alert", "emergency"]);
  assert.deepEqual(proxied, direct);
});

test("completions pass", async (t) => {
  const [direct, proxied] = await both(t, everythingServer, async (c) => [
    await c.complete({ ref: { type: "ref/prompt", name: "completable-prompt" }, argument: { name: "department", value: "S" } }),
    await c.complete({ ref: { type: "ref/prompt", name: "completable-prompt" }, argument: { name: "name", value: "" },
      context: { arguments: { department: "Engineering" } } }),
  ]);
  assert.deepEqual(direct[0].completion.values, ["Sales", "Support"]);
  assert.deepEqual(proxied, direct);
});

test("pagination: the upstream's pages pass, the read tool on the last", async (t) => {
  const [direct, proxied] = await both(t, fixtureServer, async (c) => {
    const pages = [];
    let cursor;
    do {
      const page = await c.listTools(cursor ? { cursor } : {});
      pages.push(page.tools.map((x) => x.name));
      cursor = page.nextCursor;
    } while (cursor && pages.length < 100);
    return pages;
  });
  assert.deepEqual(direct.map((p) => p.length), [5, 5, 5, 5, 3]);
  const last = proxied.length - 1;
  assert.deepEqual(proxied.slice(0, last), direct.slice(0, last));
  assert.deepEqual(proxied[last], [...direct[last], READ]);
});

test("an unknown tool reaches the upstream, which answers", async (t) => {
  const [direct, proxied] = await both(t, fixtureServer, async (c) => c.callTool({ name: "no-such-tool", arguments: {} }));
  assert.ok(direct.isError, "the fixture answers with an error result");
  assert.deepEqual(proxied, direct);
});

test("cancellation: the reason reaches the upstream", async (t) => {
  const [direct, proxied] = await both(t, fixtureServer, async (c) => {
    const stop = new AbortController();
    const call = c.callTool({ name: "wait", arguments: {} }, undefined, { signal: stop.signal });
    // The call is in flight once a second call, sent after it, is answered.
    await c.callTool({ name: "filler-03", arguments: {} });
    stop.abort("the user pressed stop");
    await assert.rejects(call);
    return until(async () => {
      const res = await c.callTool({ name: "last-cancel", arguments: {} });
      return res.content[0].text === "(none)" ? null : res.content[0].text;
    }, "the upstream hearing of the cancellation");
  });
  assert.equal(direct, "the user pressed stop");
  assert.equal(proxied, direct);
});

// exitsAfterSIGTERM signals the proxy and checks that it and every process
// under it end within two seconds, whatever was in flight.
async function exitsAfterSIGTERM(t, pid) {
  const pids = [pid, ...descendants(pid)];
  assert.ok(pids.length >= 2, `the proxy ${pid} runs no upstream`);
  const start = Date.now();
  process.kill(pid, "SIGTERM");
  await waitGone(pids, "proxy after SIGTERM");
  const took = Date.now() - start;
  t.diagnostic(`ended ${took} ms after SIGTERM`);
  assert.ok(took <= 2000, `the proxy and its upstream took ${took} ms to end after SIGTERM, want at most 2000`);
}

test("SIGTERM with a call in flight: the stdio proxy and its upstream end within 2 s", async (t) => {
  const c = await connect(t, { ...fixtureServer, proxied: true });
  const call = c.callTool({ name: "wait", arguments: {} }).catch((e) => e);
  await c.callTool({ name: "filler-03", arguments: {} });
  await exitsAfterSIGTERM(t, c.pid);
  assert.ok(await call instanceof Error, "the call in flight fails");
});

test("SIGTERM with a call in flight: the HTTP proxy and its HTTP upstream's call end within 2 s", async (t) => {
  const upPort = await freePort();
  const up = spawn(process.execPath, [everything, "streamableHttp"], { env: { ...process.env, PORT: String(upPort) }, stdio: ["ignore", "pipe", "pipe"] });
  t.after(() => up.kill("SIGKILL"));
  await waitFor(up.stderr.setEncoding("utf8"), /listening on port/, "server-everything");
  up.stdout.resume();
  up.stderr.resume();
  const proxy = spawn(casctl, ["--store", tmpdir(t), "mcp", "proxy", "--quiet", "--listen", "127.0.0.1:0",
    "--upstream-url", `http://127.0.0.1:${upPort}/mcp`], { stdio: ["ignore", "ignore", "pipe"] });
  t.after(() => proxy.kill("SIGKILL"));
  const m = await waitFor(proxy.stderr.setEncoding("utf8"), /serving MCP at (http:\S+)/, "casctl mcp proxy --listen");
  proxy.stderr.resume();
  const client = new Client({ name: "e2e-http", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(m[1])));
  t.after(() => client.close());
  let started;
  const progressed = new Promise((r) => { started = r; });
  const call = client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 60, steps: 60 } }, undefined,
    { onprogress: started, timeout: 120000 }).catch((e) => e);
  await progressed;
  const start = Date.now();
  proxy.kill("SIGTERM");
  const [code] = await once(proxy, "exit");
  const took = Date.now() - start;
  t.diagnostic(`exited ${took} ms after SIGTERM`);
  assert.equal(code, 0, "exit status after SIGTERM");
  assert.ok(took <= 2000, `the HTTP proxy took ${took} ms to exit after SIGTERM, want at most 2000`);
  assert.ok(await call instanceof Error, "the call in flight fails");
});
