// A real `memstack serve` for the tests: this checkout's memstack, on a free loopback port, a
// temporary SQLite store, one API key per tenant, window and retrieval layers (no model-backed
// layer), and an upstream chat model the test gives (the proxy's; the REST API calls no model).
// The Python: $MEMSTACK_PYTHON, else the repository's .venv/bin/python, else python3.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

export const KEYS = { acme: "key-acme", globex: "key-globex" };

export function python() {
  if (process.env.MEMSTACK_PYTHON) return process.env.MEMSTACK_PYTHON;
  const venv = join(repo, ".venv/bin/python");
  return existsSync(venv) ? venv : "python3";
}

/** The first port of the kernel's ephemeral range: ports below it are never handed to outgoing
 * connections, so a port drawn there and found free stays free until the server binds it
 * (tests/ports.py, for the same reason). */
function ephemeralStart() {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || 32768;
  } catch {
    return 32768;
  }
}

function isFree(port) {
  return new Promise((done) => {
    const probe = createNetServer();
    probe.once("error", () => done(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => done(true)));
  });
}

export async function freePort() {
  const low = 20000;
  const top = Math.max(low + 1000, ephemeralStart());
  for (let i = 0; i < 200; i++) {
    const port = low + Math.floor(Math.random() * (top - low));
    if (await isFree(port)) return port;
  }
  throw new Error(`no free port between ${low} and ${top}`);
}

/**
 * Start `memstack serve`; resolves once /health answers 200. `model`: the --model value.
 * Returns { url, stop(), output() }.
 */
export async function startServer({ model, timeoutMs = 60_000 } = {}) {
  const home = mkdtempSync(join(tmpdir(), "memstack-ts-"));
  const port = await freePort();
  const args = [
    "-m", "memstack", "serve",
    "--db", `sqlite:///${join(home, "memstack.db")}`,
    "--port", String(port),
    "--strategy", "window,retrieval",
    "--api-key", `${KEYS.acme}:acme`,
    "--api-key", `${KEYS.globex}:globex`,
    "--model", model ?? "vllm:none@http://127.0.0.1:9/v1",
    "--graceful-timeout", "5",
    "--log-level", "warning",
  ];
  const env = { ...process.env, MEMSTACK_HOME: home, PYTHONPATH: [repo, process.env.PYTHONPATH].filter(Boolean).join(":") };
  delete env.MEMSTACK_API_KEYS;
  const child = spawn(python(), args, { env, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(home, { recursive: true, force: true });
  };
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`memstack serve exited with ${child.exitCode}:\n${log}`);
    try {
      if ((await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) })).status === 200) {
        return { url, stop, output: () => log };
      }
    } catch {
      // not listening yet
    }
    await new Promise((done) => setTimeout(done, 100));
  }
  await stop();
  throw new Error(`memstack serve did not become healthy within ${timeoutMs} ms:\n${log}`);
}

/** The upstream chat model's answer: "好的，记住了。" unless a system message brought memory of
 * the user's stack, which it then recites ("我记得：" and the system messages' text). */
export function answer(body) {
  const memory = body.messages.filter((m) => m.role === "system" && /SpringBoot/.test(m.content ?? ""));
  return memory.length ? `我记得：${memory.map((m) => m.content).join(" ")}` : "好的，记住了。";
}

function chunk(body, delta, finish = null) {
  return { id: "c1", object: "chat.completion.chunk", created: 0, model: body.model, choices: [{ index: 0, delta, finish_reason: finish }] };
}

function completion(body, text) {
  return {
    id: "c1",
    object: "chat.completion",
    created: 0,
    model: body.model,
    choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: text } }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

/**
 * A deterministic OpenAI-compatible chat server on loopback (what tests/openai_stub.py is for the
 * Python tests): every POST is recorded in `received` and answered with `answer(body)`, whole or,
 * when the request streams, as server-sent chunks of 8 characters. Returns { url (its /v1),
 * model (a memstack --model value naming it), received, close() }.
 */
export async function startUpstream() {
  const received = [];
  const server = createHttpServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      const body = JSON.parse(raw);
      received.push(body);
      const text = answer(body);
      if (!body.stream) {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify(completion(body, text)));
        return;
      }
      const parts = [chunk(body, { role: "assistant", content: "" })];
      for (let i = 0; i < text.length; i += 8) parts.push(chunk(body, { content: text.slice(i, i + 8) }));
      parts.push(chunk(body, {}, "stop"));
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.end(parts.map((p) => `data: ${JSON.stringify(p)}\n\n`).join("") + "data: [DONE]\n\n");
    });
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  const url = `http://127.0.0.1:${server.address().port}/v1`;
  return { url, model: `vllm:echo@${url}`, received, close: () => new Promise((done) => server.close(done)) };
}
