// The official MCP conformance suite's server scenarios, run against the
// reference "everything" server directly and through `casctl mcp proxy`,
// with its upstream over stdio and over streamable HTTP, offloading off (a
// threshold nothing reaches) and on.
//
//   (cd server && npm ci) && npm ci && CASCTL=/path/to/casctl node --test
//
// Through the proxy with offloading off, every scenario that passes directly
// passes. With offloading on, the scenarios that fail are exactly those
// that look inside content the policy turned into a pointer.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const casctl = process.env.CASCTL || path.join(here, "..", "..", "casctl");
const node22 = path.join(here, "node_modules", ".bin", "node");
const suite = path.join(here, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js");
const serverDir = path.join(here, "server");
const READY_MS = 20000;

// The scenarios whose checks look inside a tool result's content blocks:
// with every result offloaded, their image, audio and embedded resource
// come back as a pointer and resource links instead.
const LOOK_INSIDE_CONTENT = new Set([
  "tools-call-image",
  "tools-call-audio",
  "tools-call-embedded-resource",
  "tools-call-mixed-content",
]);

assert.ok(fs.existsSync(casctl), `no casctl at ${casctl}: build it (go build -o casctl ./cmd/casctl) or set CASCTL`);
assert.ok(fs.existsSync(node22), "no Node 22 in node_modules: run npm ci here (the runner needs Node 22 or newer)");

let work;
let server; // the bundled reference server
const started = [];

before(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "toolcas-conformance-"));
  // The reference server, patched to serve stdio as well, compiled to
  // JavaScript beside its node_modules.
  const dual = path.join(work, "everything-server-dual.ts");
  execFileSync("patch", ["-s", "-o", dual, path.join(serverDir, "everything-server.ts"), path.join(serverDir, "stdio.patch")]);
  server = path.join(serverDir, "everything-server-dual.mjs");
  execFileSync(path.join(serverDir, "node_modules", "@esbuild", "linux-x64", "bin", "esbuild"),
    [dual, "--format=esm", "--platform=node", "--log-level=warning", `--outfile=${server}`], { stdio: "inherit" });
});

after(() => {
  for (const p of started) {
    try { process.kill(p.pid, "SIGKILL"); } catch {}
  }
  fs.rmSync(work, { recursive: true, force: true });
});

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

// start runs a long-lived process, failing the test with its output if it
// ends before stop.
function start(command, args, env = {}) {
  const p = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  p.stdout.on("data", (b) => { out += b; });
  p.stderr.on("data", (b) => { out += b; });
  started.push(p);
  const exited = new Promise((resolve) => p.on("exit", (code, sig) => resolve({ code, sig })));
  return {
    p,
    output: () => out,
    async stop() {
      p.kill("SIGTERM");
      const t = setTimeout(() => p.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}

// waitListening polls until something accepts connections on port.
async function waitListening(port, what) {
  const end = Date.now() + READY_MS;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, "127.0.0.1", () => { c.end(); resolve(true); });
      c.on("error", () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > end) assert.fail(`${what} did not listen on ${port} in ${READY_MS} ms: ${what.output?.() ?? ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// runSuite runs every server scenario against url and returns each
// scenario's result: "pass" or "fail".
function runSuite(url, name) {
  const out = path.join(work, name);
  let text;
  try {
    text = execFileSync(node22, [suite, "server", "--url", url, "--suite", "all", "-o", out], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    text = (e.stdout || "") + (e.stderr || ""); // a failed scenario exits 1
  }
  const results = new Map();
  for (const line of text.split("\n")) {
    const m = line.match(/^([✓✗]) (\S+): (\d+) passed, (\d+) failed/);
    if (m) results.set(m[2], m[1] === "✓" && m[4] === "0" ? "pass" : "fail");
  }
  assert.ok(results.size >= 30, `${name}: the suite reported ${results.size} scenarios:\n${text.slice(-3000)}`);
  return { results, text };
}

let directResults;

async function referenceOverHTTP() {
  const port = await freePort();
  const s = start(process.execPath, [server], { PORT: String(port) });
  await waitListening(port, "the reference server");
  return { s, url: `http://127.0.0.1:${port}/mcp` };
}

test("directly: the reference server over streamable HTTP", async () => {
  const { s, url } = await referenceOverHTTP();
  try {
    const { results, text } = runSuite(url, "direct");
    directResults = results;
    const failed = [...results].filter(([, r]) => r !== "pass").map(([n]) => n);
    assert.deepEqual(failed, [], `scenarios failing without the proxy:\n${text.slice(-3000)}`);
  } finally {
    await s.stop();
  }
});

// throughProxy runs the suite against casctl mcp proxy --listen in front of
// the reference server (over stdio, or over HTTP with upstreamURL), and
// checks that the proxy's processes are gone once it is stopped.
async function throughProxy(name, offload, upstreamHTTP) {
  assert.ok(directResults, "the direct run did not complete");
  const port = await freePort();
  const store = path.join(work, `store-${name}`);
  let upstream;
  const args = ["--store", store, "mcp", "proxy", "--quiet", "--listen", `127.0.0.1:${port}`, "--offload", offload];
  if (upstreamHTTP) {
    upstream = await referenceOverHTTP();
    args.push("--upstream-url", upstream.url);
  } else {
    args.push("--", process.execPath, server, "stdio");
  }
  const proxy = start(casctl, args);
  try {
    await waitListening(port, "the proxy");
    const run = runSuite(`http://127.0.0.1:${port}/mcp`, name);
    return run;
  } finally {
    const kids = descendants(proxy.p.pid);
    await proxy.stop();
    if (upstream) await upstream.s.stop();
    await waitGone(kids, `${name}: the proxy's upstream processes`);
  }
}

// descendants returns the pids of every live process under pid.
function descendants(pid) {
  const children = new Map();
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    let stat;
    try { stat = fs.readFileSync(`/proc/${d}/stat`, "utf8"); } catch { continue; }
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (!children.has(Number(rest[1]))) children.set(Number(rest[1]), []);
    children.get(Number(rest[1])).push(Number(d));
  }
  const out = [];
  const walk = (p) => { for (const c of children.get(p) || []) { out.push(c); walk(c); } };
  walk(pid);
  return out;
}

function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2)[0];
    return state !== "Z" && state !== "X";
  } catch { return false; }
}

async function waitGone(pids, what) {
  const end = Date.now() + READY_MS;
  for (;;) {
    const left = pids.filter(alive);
    if (left.length === 0) return;
    if (Date.now() > end) assert.fail(`${what}: processes ${left} still run after the proxy stopped`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// sameAsDirect checks that every scenario that passes directly passes.
function sameAsDirect({ results, text }, except = new Set()) {
  for (const [name, direct] of directResults) {
    const got = results.get(name);
    if (except.has(name)) {
      assert.equal(got, "fail", `${name} passed with every result offloaded: it should have seen a pointer`);
      continue;
    }
    if (direct === "pass") assert.equal(got, "pass", `${name} passes directly and not through the proxy:\n${text.slice(-3000)}`);
  }
}

const HIGH = "*=over:1000000000";

test("through the proxy, upstream over stdio, offloading off", async () => {
  sameAsDirect(await throughProxy("stdio-off", HIGH, false));
});

test("through the proxy, upstream over streamable HTTP, offloading off", async () => {
  sameAsDirect(await throughProxy("http-off", HIGH, true));
});

test("through the proxy, upstream over stdio, every result offloaded", async () => {
  sameAsDirect(await throughProxy("stdio-on", "*=over:10", false), LOOK_INSIDE_CONTENT);
});

test("through the proxy, upstream over streamable HTTP, every result offloaded", async () => {
  sameAsDirect(await throughProxy("http-on", "*=over:10", true), LOOK_INSIDE_CONTENT);
});
