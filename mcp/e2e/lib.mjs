// Helpers shared by the end-to-end tests: where casctl and the reference
// servers are, temporary directories, and waiting for processes and output.
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

export const here = path.dirname(fileURLToPath(import.meta.url));
export const casctl = process.env.CASCTL || path.join(here, "..", "..", "casctl");
export const everything = path.join(here, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
export const filesystem = path.join(here, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
export const READ = "read_tool_result";
export const DEADLINE_MS = 20000;

assert.ok(fs.existsSync(casctl), `no casctl at ${casctl}: build it (go build -o casctl ./cmd/casctl) or set CASCTL`);

export function tmpdir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "toolcas-e2e-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// descendants returns the pids of every live process under pid.
export function descendants(pid) {
  const children = new Map();
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    let stat;
    try { stat = fs.readFileSync(`/proc/${d}/stat`, "utf8"); } catch { continue; }
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (rest[0] === "Z") continue;
    const ppid = Number(rest[1]);
    if (!children.has(ppid)) children.set(ppid, []);
    children.get(ppid).push(Number(d));
  }
  const out = [];
  const walk = (p) => { for (const c of children.get(p) || []) { out.push(c); walk(c); } };
  walk(pid);
  return out;
}

export function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2)[0];
    return state !== "Z" && state !== "X";
  } catch { return false; }
}

// waitGone polls until none of pids runs, failing past the deadline.
export async function waitGone(pids, what) {
  const end = Date.now() + DEADLINE_MS;
  for (;;) {
    const left = pids.filter(alive);
    if (left.length === 0) return;
    if (Date.now() > end) assert.fail(`${what}: processes ${left} still run after the client left`);
    await new Promise((r) => setTimeout(r, 20));
  }
}


// freePort returns a TCP port nothing listens on now.
export async function freePort() {
  const srv = net.createServer();
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const { port } = srv.address();
  srv.close();
  await once(srv, "close");
  return port;
}

// waitFor reads a child's stream until re matches, and returns the match.
export async function waitFor(stream, re, what) {
  let text = "";
  const timer = setTimeout(() => stream.emit("error", new Error(`${what}: nothing matching ${re} in ${DEADLINE_MS} ms: ${text}`)), DEADLINE_MS);
  try {
    for await (const chunk of stream) {
      text += chunk;
      const m = text.match(re);
      if (m) return m;
    }
  } finally {
    clearTimeout(timer);
  }
  throw new Error(`${what}: stream ended before ${re}: ${text}`);
}
