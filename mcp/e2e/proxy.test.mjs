// End-to-end test of `casctl mcp proxy`, driven by the TypeScript MCP SDK
// alone, in front of the reference servers "everything" and "filesystem".
//
//   CASCTL=/path/to/casctl node --test
//
// Every offloaded part is read back byte for byte through the read tool and
// resources/read; after each client leaves, no process of the proxy's is
// left.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import path from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { casctl, everything, filesystem, READ, tmpdir, descendants, waitGone, freePort, waitFor } from "./lib.mjs";

// connectStdio starts casctl mcp proxy with args and connects a client.
async function connectStdio(t, store, args) {
  const transport = new StdioClientTransport({
    command: casctl,
    args: ["--store", store, "mcp", "proxy", "--quiet", ...args],
    env: { ...process.env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr.on("data", (b) => { stderr += b; });
  const client = new Client({ name: "e2e", version: "1.0.0" });
  try {
    await client.connect(transport);
  } catch (e) {
    throw new Error(`connect: ${e.message}; proxy stderr: ${stderr}`);
  }
  return { client, transport, stderrText: () => stderr };
}

// direct connects a client to an upstream without the proxy.
async function direct(command, args) {
  const client = new Client({ name: "e2e-direct", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
  return client;
}

function pointerOf(result) {
  assert.equal(result.content[0].type, "text");
  assert.match(result.content[0].text, /^Tool result offloaded to /);
  const recs = result._meta?.tool_result_offloaded;
  assert.ok(Array.isArray(recs) && recs.length > 0, `no tool_result_offloaded in _meta: ${JSON.stringify(result._meta)}`);
  for (const r of recs) {
    assert.ok(r.key && r.uri && r.digest && r.path, `record ${JSON.stringify(r)} lacks key, uri, digest or path`);
    assert.ok(result.content.some((c) => c.type === "resource_link" && c.uri === r.uri), `no resource link to ${r.uri}`);
  }
  return recs;
}

// readText pages through a text part with the read tool and joins its
// lines. It goes by the numbered lines alone ("N<tab>line"), not by the
// wording of the page's header, and stops at the first page with none. A
// line longer than a page comes cut, with "read on with offset=I
// byte_offset=B": the next page goes on from there, and its first line
// continues the cut one.
async function readText(client, readTool, ref) {
  const lines = [];
  let offset = 0;
  let byteOffset = 0;
  for (;;) {
    const args = { ref, offset, limit: 500 };
    if (byteOffset > 0) args.byte_offset = byteOffset;
    const res = await client.callTool({ name: readTool, arguments: args });
    assert.ok(!res.isError, `read ${ref}: ${JSON.stringify(res.content)}`);
    const text = res.content[0].text;
    let n = 0;
    for (const l of text.split("\n")) {
      const m = /^(\d+)\t/.exec(l);
      if (!m) continue; // the page's header, or a cut line's note
      assert.equal(Number(m[1]), offset + n + 1, `read ${ref}: lines out of order`);
      if (n === 0 && byteOffset > 0) {
        lines[lines.length - 1] += l.slice(m[0].length);
      } else {
        lines.push(l.slice(m[0].length));
      }
      n++;
    }
    if (n === 0) break;
    const cut = /read on with offset=(\d+) byte_offset=(\d+)/.exec(text);
    if (cut) {
      offset = Number(cut[1]);
      byteOffset = Number(cut[2]);
    } else {
      offset += n;
      byteOffset = 0;
    }
  }
  return lines.join("\n");
}

// readResource reads a toolcas:// part and returns its bytes and MIME type.
async function readResource(client, uri) {
  const res = await client.readResource({ uri });
  const c = res.contents[0];
  const bytes = c.blob !== undefined ? Buffer.from(c.blob, "base64") : Buffer.from(c.text, "utf8");
  return { bytes, mimeType: c.mimeType };
}

// readBinary reads a binary part with the read tool: its header, then the
// content block.
async function readBinary(client, readTool, ref) {
  const res = await client.callTool({ name: readTool, arguments: { ref } });
  assert.ok(!res.isError, `read ${ref}: ${JSON.stringify(res.content)}`);
  return res.content[1];
}

// checkAllParts reads every offloaded part back both ways and compares
// with what the upstream sent (its content blocks, in order).
async function checkAllParts(client, readTool, recs, original) {
  assert.equal(recs.length, original.length, "one offloaded part per content block");
  for (let i = 0; i < recs.length; i++) {
    const o = original[i];
    const { bytes, mimeType } = await readResource(client, recs[i].uri);
    if (o.type === "text") {
      assert.equal(bytes.toString("utf8"), o.text, `part ${i}: resources/read differs`);
      assert.equal(await readText(client, readTool, recs[i].key), o.text, `part ${i}: read tool differs`);
    } else if (o.type === "image" || o.type === "audio") {
      assert.deepEqual(bytes, Buffer.from(o.data, "base64"), `part ${i}: resources/read differs`);
      assert.equal(mimeType, o.mimeType);
      const c = await readBinary(client, readTool, recs[i].key);
      assert.equal(c.type, o.type, `part ${i}: read tool returns ${c.type}, want ${o.type}`);
      assert.equal(c.mimeType, o.mimeType);
      assert.equal(c.data, o.data, `part ${i}: read tool's ${o.type} differs`);
    } else if (o.type === "resource" && o.resource.blob !== undefined) {
      assert.deepEqual(bytes, Buffer.from(o.resource.blob, "base64"), `part ${i}: resources/read differs`);
      const c = await readBinary(client, readTool, recs[i].key);
      const data = c.type === "resource" ? c.resource.blob : c.data;
      assert.equal(data, o.resource.blob, `part ${i}: read tool's blob differs`);
    } else if (o.type === "resource") {
      assert.equal(bytes.toString("utf8"), o.resource.text, `part ${i}: resources/read differs`);
      assert.equal(await readText(client, readTool, recs[i].key), o.resource.text, `part ${i}: read tool differs`);
    } else {
      assert.fail(`part ${i}: unexpected block ${o.type}`);
    }
  }
}

test("stdio proxy in front of server-everything (stdio)", async (t) => {
  const store = tmpdir(t);
  const upstream = [process.execPath, everything, "stdio"];
  const { client, transport } = await connectStdio(t, store, [
    "--offload", "*=over:2000", "--offload", "get-tiny-image=always", "--offload", "get-resource-reference=always",
    "--", ...upstream,
  ]);
  const proxyPid = transport.pid;
  const everythingDirect = await direct(upstream[0], upstream.slice(1));
  t.after(() => everythingDirect.close());

  await t.test("mirrors the tools and adds the read tool", async () => {
    const want = (await everythingDirect.listTools()).tools;
    const got = (await client.listTools()).tools;
    const byName = new Map(got.map((x) => [x.name, x]));
    for (const w of want) {
      const g = byName.get(w.name);
      if (!g) continue; // tools registered only for clients with sampling, roots or elicitation
      assert.deepEqual(g.inputSchema, w.inputSchema, `${w.name}: input schema`);
      assert.equal(g.description, w.description, `${w.name}: description`);
      assert.deepEqual(g.annotations, w.annotations, `${w.name}: annotations`);
    }
    for (const name of ["echo", "get-tiny-image", "get-resource-links", "get-structured-content", READ]) {
      assert.ok(byName.has(name), `no tool ${name}`);
    }
    const tmpl = (await client.listResourceTemplates()).resourceTemplates.map((x) => x.uriTemplate);
    assert.ok(tmpl.includes("toolcas://{run}/{key}"), `templates: ${tmpl}`);
    const prompts = (await client.listPrompts()).prompts.map((x) => x.name);
    assert.ok(prompts.includes("simple-prompt"), `prompts: ${prompts}`);
    const pr = await client.getPrompt({ name: "simple-prompt" });
    assert.ok(pr.messages.length > 0);
  });

  await t.test("small results pass untouched", async () => {
    for (const [name, args] of [["echo", { message: "hello" }], ["get-sum", { a: 2, b: 3 }], ["get-resource-links", { count: 3 }]]) {
      const got = await client.callTool({ name, arguments: args });
      const want = await everythingDirect.callTool({ name, arguments: args });
      assert.deepEqual(got, want, `${name} changed`);
    }
    const got = await client.callTool({ name: "get-structured-content", arguments: { location: "New York" } });
    const want = await everythingDirect.callTool({ name: "get-structured-content", arguments: { location: "New York" } });
    assert.deepEqual(got.structuredContent, want.structuredContent);
  });

  await t.test("a big result becomes a pointer and reads back", async () => {
    const message = Array.from({ length: 3000 }, (_, i) => `line ${i}: ${"é∑".repeat(i % 7)} some text`).join("\n");
    const args = { name: "echo", arguments: { message } };
    const want = await everythingDirect.callTool(args);
    const got = await client.callTool(args);
    assert.ok(JSON.stringify(got).length < 4000, "the pointer is short");
    const recs = pointerOf(got);
    await checkAllParts(client, READ, recs, want.content);
  });

  await t.test("an image result: every part offloaded, the image read back as an image", async () => {
    const want = await everythingDirect.callTool({ name: "get-tiny-image", arguments: {} });
    const got = await client.callTool({ name: "get-tiny-image", arguments: {} });
    const recs = pointerOf(got);
    assert.equal(recs.length, 3);
    await checkAllParts(client, READ, recs, want.content);
  });

  await t.test("embedded resources, text and blob", async () => {
    for (const resourceType of ["Text", "Blob"]) {
      // The resource's text holds the time to the second: the proxied call
      // sits between two direct ones that agree, so it got the same bytes.
      const args = { name: "get-resource-reference", arguments: { resourceType, resourceId: 3 } };
      let want, got;
      for (let attempt = 0; attempt < 5; attempt++) {
        const before = await everythingDirect.callTool(args);
        got = await client.callTool(args);
        const after = await everythingDirect.callTool(args);
        if (JSON.stringify(before) === JSON.stringify(after)) {
          want = before;
          break;
        }
      }
      assert.ok(want, "the upstream's answer changed on every attempt");
      const recs = pointerOf(got);
      await checkAllParts(client, READ, recs, want.content);
    }
  });

  await t.test("progress reaches the client", async () => {
    const seen = [];
    const res = await client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } }, undefined,
      { onprogress: (p) => seen.push(p) });
    assert.ok(!res.isError);
    // The proxy sends all three before the answer (the Go tests show it),
    // but this SDK runs notification handlers a microtask late while it
    // settles answers at once: when the last notification and the answer
    // come in one read, the last is dropped as late. So: in order, none
    // made up, at least the first two.
    const got = seen.map((p) => p.progress);
    assert.ok(got.length >= 2, `progress notifications: ${JSON.stringify(seen)}`);
    assert.deepEqual(got, [1, 2, 3].slice(0, got.length));
    assert.ok(seen.every((p) => p.total === 3));
  });

  await t.test("error results pass untouched", async () => {
    const args = { name: "get-resource-reference", arguments: { resourceType: "Nope", resourceId: 1 } };
    const got = await client.callTool(args);
    assert.ok(got.isError, "an error result");
    assert.deepEqual(got, await everythingDirect.callTool(args));
  });

  const pids = [proxyPid, ...descendants(proxyPid)];
  assert.ok(pids.length >= 2, `the proxy ${proxyPid} runs no upstream`);
  await client.close();
  await waitGone(pids, "stdio proxy");
});

test("every result offloaded (*=over:10): only the pointers differ, and every part reads back", async (t) => {
  const store = tmpdir(t);
  const upstream = [process.execPath, everything, "stdio"];
  const { client, transport } = await connectStdio(t, store, ["--offload", "*=over:10", "--", ...upstream]);
  const everythingDirect = await direct(upstream[0], upstream.slice(1));
  t.after(() => everythingDirect.close());
  for (const [name, args] of [
    ["echo", { message: "hello, offloaded" }],
    ["get-sum", { a: 2, b: 3 }],
    ["get-tiny-image", {}],
    ["get-annotated-message", { messageType: "error", includeImage: true }],
    ["get-structured-content", { location: "New York" }],
  ]) {
    const want = await everythingDirect.callTool({ name, arguments: args });
    const got = await client.callTool({ name, arguments: args });
    assert.equal(Boolean(got.isError), Boolean(want.isError), `${name}: isError`);
    assert.deepEqual(got.structuredContent, want.structuredContent, `${name}: structured content`);
    await checkAllParts(client, READ, pointerOf(got), want.content);
  }
  const pids = [transport.pid, ...descendants(transport.pid)];
  await client.close();
  await waitGone(pids, "stdio proxy");
});

test("streamable HTTP both ways: proxy --listen, upstream server-everything over HTTP", async (t) => {
  const store = tmpdir(t);
  const upPort = await freePort();
  const up = spawn(process.execPath, [everything, "streamableHttp"], { env: { ...process.env, PORT: String(upPort) }, stdio: ["ignore", "pipe", "pipe"] });
  t.after(() => up.kill("SIGKILL"));
  await waitFor(up.stderr.setEncoding("utf8"), /listening on port/, "server-everything");
  up.stdout.resume();
  up.stderr.resume();

  const proxy = spawn(casctl, ["--store", store, "mcp", "proxy", "--quiet", "--listen", "127.0.0.1:0",
    "--offload", "*=over:2000", "--upstream-url", `http://127.0.0.1:${upPort}/mcp`], { stdio: ["ignore", "ignore", "pipe"] });
  t.after(() => proxy.kill("SIGKILL"));
  const m = await waitFor(proxy.stderr.setEncoding("utf8"), /serving MCP at (http:\S+)/, "casctl mcp proxy --listen");
  proxy.stderr.resume();
  const client = new Client({ name: "e2e-http", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(m[1])));

  const message = "x".repeat(70000);
  const got = await client.callTool({ name: "echo", arguments: { message } });
  const recs = pointerOf(got);
  await checkAllParts(client, READ, recs, [{ type: "text", text: `Echo: ${message}` }]);
  const small = await client.callTool({ name: "echo", arguments: { message: "hi" } });
  assert.deepEqual(small.content, [{ type: "text", text: "Echo: hi" }]);

  const seen = [];
  await client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } }, undefined,
    { onprogress: (p) => seen.push(p.progress) });
  assert.ok(seen.length >= 2, `progress over HTTP: ${JSON.stringify(seen)}`);
  assert.deepEqual(seen, [1, 2, 3].slice(0, seen.length));

  // The tiny image is 1.6 KiB, over 2000 characters as base64: the whole
  // result goes, and every part reads back.
  const upDirect = new Client({ name: "e2e-direct", version: "1.0.0" });
  await upDirect.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${upPort}/mcp`)));
  const want = await upDirect.callTool({ name: "get-tiny-image", arguments: {} });
  await upDirect.close();
  const img = await client.callTool({ name: "get-tiny-image", arguments: {} });
  await checkAllParts(client, READ, pointerOf(img), want.content);
  await client.close();

  const pids = [proxy.pid, ...descendants(proxy.pid)];
  proxy.kill("SIGTERM");
  const [code] = await once(proxy, "exit");
  assert.equal(code, 0, "proxy exit code on SIGTERM");
  await waitGone(pids, "HTTP proxy");
});

test("stdio proxy in front of server-filesystem reading big files", async (t) => {
  const store = tmpdir(t);
  const root = fs.realpathSync(tmpdir(t));
  const bigText = Array.from({ length: 20000 }, (_, i) => `${i}\tfunc f${i}() { return "ünïcödé" } // ${"#".repeat(i % 40)}`).join("\n");
  fs.writeFileSync(path.join(root, "big.go"), bigText);
  const png = Buffer.concat([Buffer.from("89504e470d0a1a0a", "hex"), Buffer.alloc(100000, 7)]);
  fs.writeFileSync(path.join(root, "shot.png"), png);
  const pdf = Buffer.concat([Buffer.from("%PDF-1.7\n"), Buffer.alloc(50000, 0xfe)]);
  fs.writeFileSync(path.join(root, "q3.pdf"), pdf);
  fs.writeFileSync(path.join(root, "small.txt"), "just a line");

  // A limit above the text's 1.3 MB: resources/read returns it whole.
  const { client, transport } = await connectStdio(t, store, ["--max-resource-bytes", "4194304", "--", process.execPath, filesystem, root]);
  const proxyPid = transport.pid;

  const txt = await client.callTool({ name: "read_text_file", arguments: { path: path.join(root, "big.go") } });
  const recs = pointerOf(txt);
  await checkAllParts(client, READ, recs, [{ type: "text", text: bigText }]);
  assert.deepEqual(txt.structuredContent, { content: bigText }, "structured content passes untouched");

  const small = await client.callTool({ name: "read_text_file", arguments: { path: path.join(root, "small.txt") } });
  assert.deepEqual(small.content, [{ type: "text", text: "just a line" }]);

  const media = await client.callTool({ name: "read_media_file", arguments: { path: path.join(root, "shot.png") } });
  await checkAllParts(client, READ, pointerOf(media), [{ type: "image", mimeType: "image/png", data: png.toString("base64") }]);

  const doc = await client.callTool({ name: "read_media_file", arguments: { path: path.join(root, "q3.pdf") } });
  await checkAllParts(client, READ, pointerOf(doc), [{ type: "resource", resource: { blob: pdf.toString("base64") } }]);

  const pids = [proxyPid, ...descendants(proxyPid)];
  assert.ok(pids.length >= 2, `the proxy ${proxyPid} runs no upstream`);
  await client.close();
  await waitGone(pids, "filesystem proxy");
});

test("an upstream that does not start: initialize fails with an error naming it", async (t) => {
  const store = tmpdir(t);
  const transport = new StdioClientTransport({
    command: casctl,
    args: ["--store", store, "mcp", "proxy", "--quiet", "--", "/nonexistent/mcp-server", "--x"],
    stderr: "pipe",
  });
  const client = new Client({ name: "e2e", version: "1.0.0" });
  await assert.rejects(client.connect(transport),
    (e) => /upstream \/nonexistent\/mcp-server --x did not start/.test(e.message));
  const pid = transport.pid;
  await client.close();
  if (pid) await waitGone([pid], "proxy without upstream");
});

test("casctl mcp serve reads back, from another process, what the proxy stored", async (t) => {
  const store = tmpdir(t);
  const { client } = await connectStdio(t, store, ["--run", "e2e-run", "--", process.execPath, everything, "stdio"]);
  const message = "y".repeat(20000);
  const recs = pointerOf(await client.callTool({ name: "echo", arguments: { message } }));
  await client.close();

  const serve = new Client({ name: "e2e-serve", version: "1.0.0" });
  const transport = new StdioClientTransport({ command: casctl, args: ["--store", store, "mcp", "serve"], stderr: "ignore" });
  await serve.connect(transport);
  const tools = (await serve.listTools()).tools.map((x) => x.name).sort();
  assert.deepEqual(tools, ["read_tool_result", "search", "stats"]);
  const found = await serve.callTool({ name: "search", arguments: { run: "e2e-run" } });
  assert.deepEqual(found.structuredContent.parts.map((p) => p.key), [recs[0].key]);
  const stats = await serve.callTool({ name: "stats", arguments: {} });
  assert.equal(stats.structuredContent.parts, 1);
  await checkAllParts(serve, READ, recs, [{ type: "text", text: `Echo: ${message}` }]);
  const pid = transport.pid;
  await serve.close();
  await waitGone([pid], "casctl mcp serve");
});
