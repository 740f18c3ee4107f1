// The official `openai` npm package against memstack's OpenAI-compatible proxy: only the base URL
// changes, and a streamed answer in a new thread remembers what the user said in another.
//
// The proxy's upstream is a deterministic OpenAI-compatible chat server in this process
// (support.mjs's startUpstream): its answer recites the memory the proxy put in its system
// messages, and the request it recorded shows the context the model received. No model is loaded.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import OpenAI from "openai";

import { MemstackClient } from "../dist/index.js";
import { KEYS, startServer, startUpstream } from "./support.mjs";

let server;
let openai;
let memstack;

let upstream;
/** What the upstream received, request by request. */
let received;

before(async () => {
  upstream = await startUpstream();
  received = upstream.received;
  server = await startServer({ model: upstream.model });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.acme, maxRetries: 0 });
  memstack = new MemstackClient(server.url, { apiKey: KEYS.acme });
});

after(async () => {
  await server?.stop();
  await upstream?.close();
});

const ask = (thread, content, extra = {}) =>
  openai.chat.completions.create(
    { model: "any", user: "user_001", messages: [{ role: "user", content }], ...extra },
    { headers: { "X-Memstack-Thread": thread } },
  );

test("a streamed answer in a new thread remembers what the user said in another", async () => {
  const first = await ask("s1", "我正在开发一个知识中台，后端使用SpringBoot");
  assert.equal(first.choices[0].message.content, "好的，记住了。");
  await memstack.flush(); // the retrieval layer has indexed the first round

  const stream = await ask("s2", "我的后端使用什么技术？", { stream: true });
  let text = "";
  let chunks = 0;
  for await (const part of stream) {
    text += part.choices[0]?.delta?.content ?? "";
    chunks += 1;
  }
  assert.ok(chunks > 2, `streamed in ${chunks} chunks`);
  assert.match(text, /^我记得：.*SpringBoot/s);

  // what the model received: one system message of memory from thread s1, then the question alone
  const sent = received.at(-1);
  assert.equal(sent.stream, true);
  assert.deepEqual(sent.messages.at(-1), { role: "user", content: "我的后端使用什么技术？" });
  const memory = sent.messages.filter((m) => m.role === "system");
  assert.equal(memory.length, 1);
  assert.match(memory[0].content, /我正在开发一个知识中台，后端使用SpringBoot/);

  // the proxy stored both threads' rounds, the streamed answer whole
  const s2 = await memstack.history({ userId: "user_001", threadId: "s2" });
  assert.deepEqual(
    s2.map((m) => [m.role, m.content]),
    [
      ["user", "我的后端使用什么技术？"],
      ["assistant", text],
    ],
  );
});

test("another tenant's user of the same id has none of it", async () => {
  const other = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.globex, maxRetries: 0 });
  const stream = await other.chat.completions.create(
    { model: "any", user: "user_001", messages: [{ role: "user", content: "我的后端使用什么技术？" }], stream: true },
    { headers: { "X-Memstack-Thread": "s2" } },
  );
  let text = "";
  for await (const part of stream) text += part.choices[0]?.delta?.content ?? "";
  assert.equal(text, "好的，记住了。");
  assert.ok(!JSON.stringify(received.at(-1).messages).includes("SpringBoot"));
});

test("a wrong key is the openai package's AuthenticationError, with the server's code", async () => {
  const stranger = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "not-a-key", maxRetries: 0 });
  await assert.rejects(
    stranger.chat.completions.create({ model: "any", user: "u", messages: [{ role: "user", content: "hi" }] }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401 && e.error?.code === "unauthorized",
  );
});
