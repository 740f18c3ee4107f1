// The examples of docs/typescript.md run as written: each block marked `<!-- example: PATH -->` is
// the file at PATH (compiled by `npm test` from examples/ to build/examples/), and each file runs
// against a real `memstack serve`: the quickstart as a reader runs it, the Next.js route handler
// called as Next.js calls it (a web Request in, a streamed Response out) with the deterministic
// upstream of support.mjs as its OpenAI-compatible model.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";

import { MemstackClient } from "../dist/index.js";
import { KEYS, repo, startServer, startUpstream } from "./support.mjs";

const pkg = join(repo, "clients/typescript");
const built = (example) => join(pkg, "build", example.replace(/^examples\//, "examples/").replace(/\.ts$/, ".js"));

let server;
let upstream;

before(async () => {
  upstream = await startUpstream();
  server = await startServer({ model: upstream.model });
});

after(async () => {
  await server?.stop();
  await upstream?.close();
});

test("every example block of docs/typescript.md is its file, as written", () => {
  const page = readFileSync(join(repo, "docs/typescript.md"), "utf8");
  const blocks = [...page.matchAll(/<!-- example: (\S+) -->\n```ts\n(.*?)^```$/gms)];
  assert.deepEqual(
    blocks.map((b) => b[1]),
    [
      "clients/typescript/examples/quickstart.ts",
      "clients/typescript/examples/nextjs/app/api/chat/route.ts",
      "clients/typescript/examples/proxy.ts",
    ],
  );
  for (const [, path, code] of blocks) assert.equal(code, readFileSync(join(repo, path), "utf8"), `${path} differs from its block`);
});

test("the quickstart prints the memory of another session, a hit and an invalid field", async () => {
  const env = { ...process.env, MEMSTACK_URL: server.url, MEMSTACK_API_KEY: KEYS.acme };
  const { stdout } = await promisify(execFile)(process.execPath, [built("examples/quickstart.ts")], { env, cwd: pkg });
  const lines = stdout.trimEnd().split("\n");
  assert.equal(lines[0], "以下是从历史对话中检索到的相关记忆（按时间排序）：");
  assert.match(lines[1], /^\[\d{4}-\d\d-\d\d .+\]$/);
  assert.equal(lines[2], "用户: 我正在开发一个知识中台，后端使用SpringBoot");
  assert.match(stdout, /^用户: 我正在开发一个知识中台，后端使用SpringBoot\n助手: 好的，记住了。 s1$/m); // the hit and its thread
  assert.equal(lines.at(-1), "invalid_input messages[0].content");
});

test("the Next.js route handler streams an answer that remembers another thread, and stores the round", async () => {
  Object.assign(process.env, {
    MEMSTACK_URL: server.url,
    MEMSTACK_API_KEY: KEYS.globex,
    OPENAI_BASE_URL: upstream.url,
    OPENAI_API_KEY: "sk-test",
    CHAT_MODEL: "echo",
  });
  const { POST } = await import(pathToFileURL(built("examples/nextjs/app/api/chat/route.ts")).href);
  const chat = (threadId, message) =>
    POST(new Request("http://localhost/api/chat", { method: "POST", body: JSON.stringify({ userId: "zhang", threadId, message }) }));

  const first = await chat("monday", "我们的后端使用SpringBoot");
  assert.equal(await first.text(), "好的，记住了。");
  const memstack = new MemstackClient(server.url, { apiKey: KEYS.globex });
  await memstack.flush();

  const second = await chat("tuesday", "我们的后端用什么？");
  assert.equal(second.headers.get("content-type"), "text/plain; charset=utf-8");
  const text = await second.text();
  assert.match(text, /^我记得：.*我们的后端使用SpringBoot/s);
  const sent = upstream.received.at(-1);
  assert.equal(sent.model, "echo");
  assert.deepEqual(sent.messages.at(-1), { role: "user", content: "我们的后端用什么？" });
  assert.deepEqual(
    (await memstack.history({ userId: "zhang", threadId: "tuesday" })).map((m) => [m.role, m.content]),
    [
      ["user", "我们的后端用什么？"],
      ["assistant", text],
    ],
  );

  const empty = await chat("tuesday", " ");
  assert.equal(empty.status, 422);
  assert.equal((await empty.json()).error.field, "message");
  const long = await chat("t".repeat(300), "你好");
  assert.equal(long.status, 422);
  assert.deepEqual((await long.json()).error, { code: "invalid_input", field: "thread_id", message: "thread_id is longer than 256 characters" });
});
