// MemstackClient (the built package, dist/) against a real `memstack serve`: add, history,
// threads, context, search, forget, state, two tenants and a wrong key, invalid input naming its
// field, an add retried with its Idempotency-Key stored once, and a server that is not there.
import assert from "node:assert/strict";
import { createServer, connect } from "node:net";
import { after, before, describe, test } from "node:test";

import { InvalidInput, MemstackClient, MemstackError, NotFound, Unauthorized, Unavailable, UsageError } from "../dist/index.js";
import { freePort, KEYS, startServer } from "./support.mjs";

const PROJECT = [
  { role: "user", content: "我正在开发一个知识中台，后端使用SpringBoot" },
  { role: "assistant", content: "好的，记住了。" },
];

let server;
let acme;
let globex;

before(async () => {
  server = await startServer();
  acme = new MemstackClient(server.url, { apiKey: KEYS.acme });
  globex = new MemstackClient(server.url, { apiKey: KEYS.globex });
});

after(async () => {
  await server?.stop();
});

describe("a user's memory", () => {
  test("add stores the messages and history reads them back in order", async () => {
    const stored = await acme.add(PROJECT, { userId: "user_001", threadId: "s1", at: "2026-11-02T20:00:00+08:00" });
    assert.deepEqual(
      stored.map((m) => [m.role, m.content]),
      PROJECT.map((m) => [m.role, m.content]),
    );
    assert.ok(stored.every((m) => typeof m.id === "string" && m.id.length > 0));
    const history = await acme.history({ userId: "user_001", threadId: "s1" });
    assert.deepEqual(
      history.map((m) => m.id),
      stored.map((m) => m.id),
    );
    assert.equal(history[0].timestamp.slice(0, 10), "2026-11-02");
    const threads = await acme.threads({ userId: "user_001" });
    assert.deepEqual(
      threads.map((t) => [t.thread_id, t.messages]),
      [["s1", 2]],
    );
  });

  test("a plain string is a user message, and English is stored as sent", async () => {
    const [message] = await acme.add("I play tennis every Sunday", { userId: "user_en", threadId: "t1" });
    assert.equal(message.role, "user");
    assert.equal(message.content, "I play tennis every Sunday");
  });

  test("ids are any text but '/': Chinese, spaces, '?', '#' and '%' reach the thread they name", async () => {
    for (const threadId of ["会话 1", "a?b=c", "a#b", "100%"]) await acme.add("你好", { userId: "张三", threadId });
    assert.deepEqual((await acme.threads({ userId: "张三" })).map((t) => t.thread_id).sort(), ["100%", "a#b", "a?b=c", "会话 1"]);
    assert.equal((await acme.history({ userId: "张三", threadId: "a?b=c" })).length, 1);
  });

  test("context in a new thread carries what the user said in another, within the budget", async () => {
    await acme.flush();
    const ctx = await acme.context({ userId: "user_001", threadId: "s2", query: "我的后端使用什么技术？", maxTokens: 1000 });
    assert.equal(ctx.messages[0].role, "system");
    assert.match(ctx.messages[0].content, /SpringBoot/);
    assert.deepEqual(ctx.messages.at(-1), { role: "user", content: "我的后端使用什么技术？" });
    assert.ok(ctx.tokens <= 1000 && ctx.max_tokens === 1000);
    assert.ok(ctx.sections["memory:retrieval"] > 0, JSON.stringify(ctx.sections));
    assert.equal(ctx.toOpenAI(), ctx.messages);
    assert.equal(ctx.pending, 0); // flushed: the user has no job left
  });

  test("search finds the earlier round across threads, best first", async () => {
    await acme.flush();
    const hits = await acme.search("后端用什么技术", { userId: "user_001", k: 3 });
    assert.ok(hits.length >= 1);
    assert.match(hits[0].text, /SpringBoot/);
    assert.equal(hits[0].thread_id, "s1");
    assert.ok(hits.every((h, i) => i === 0 || hits[i - 1].score >= h.score));
    const english = await acme.search("which sport do I play?", { userId: "user_en" });
    assert.match(english[0].text, /tennis/);
  });

  test("state keeps JSON values, key by key", async () => {
    const record = await acme.setState("city", "杭州", { userId: "user_001" });
    assert.equal(record.value, "杭州");
    await acme.setState("stack", { backend: "SpringBoot", db: ["MySQL"] }, { userId: "user_001" });
    assert.equal(await acme.getState("city", { userId: "user_001" }), "杭州");
    assert.deepEqual(await acme.state({ userId: "user_001" }), { city: "杭州", stack: { backend: "SpringBoot", db: ["MySQL"] } });
    await assert.rejects(acme.getState("nope", { userId: "user_001" }), (e) => e instanceof NotFound && e.field === "key");
  });

  test("an add retried with its Idempotency-Key is stored once", async () => {
    const scope = { userId: "user_retry", threadId: "t", idempotencyKey: "add-42" };
    const first = await acme.add("第一次发送", scope);
    const again = await acme.add("第一次发送", scope);
    assert.deepEqual(
      again.map((m) => m.id),
      first.map((m) => m.id),
    );
    assert.equal((await acme.history({ userId: "user_retry", threadId: "t" })).length, 1);
  });

  test("an add whose answer was lost after the server stored it is retried, and stored once", async () => {
    // a TCP hop that forwards the first request and drops its connection when the answer comes back
    const target = new URL(server.url);
    let connections = 0;
    const hop = createServer((socket) => {
      const first = ++connections === 1;
      const upstream = connect(Number(target.port), target.hostname);
      socket.pipe(upstream);
      upstream.on("data", (data) => (first ? socket.destroy() : socket.write(data)));
      socket.on("error", () => upstream.destroy());
      socket.on("close", () => upstream.destroy());
      upstream.on("error", () => socket.destroy());
    });
    await new Promise((done) => hop.listen(0, "127.0.0.1", done));
    try {
      const client = new MemstackClient(`http://127.0.0.1:${hop.address().port}`, { apiKey: KEYS.acme });
      const stored = await client.add("这条只存一次", { userId: "user_drop", threadId: "t" });
      assert.equal(connections, 2); // the first answer was lost: the add was sent again
      const history = await acme.history({ userId: "user_drop", threadId: "t" });
      assert.deepEqual(
        history.map((m) => [m.id, m.content]),
        stored.map((m) => [m.id, "这条只存一次"]),
      );
    } finally {
      hop.close();
    }
  });

  test("a saved memory is forgotten by id; a user's pending jobs are counted and run", async () => {
    const scope = { userId: "user_saved", threadId: "t1" };
    const saved = await acme.callTool("save_memory", { content: "我喜欢在早上跑步" }, scope);
    const memoryId = saved.split(" ")[2].replace(/:$/, "");
    const gone = await acme.forgetSaved({ userId: "user_saved", memoryId });
    assert.equal(gone.id, memoryId);
    assert.equal(gone.text, "我喜欢在早上跑步");
    await assert.rejects(acme.forgetSaved({ userId: "user_saved", memoryId }), (e) => e instanceof InvalidInput && e.field === "memory_id");
    await acme.add(["I moved to Shenzhen last month", "好的"].map((content, i) => ({ role: i ? "assistant" : "user", content })), scope);
    assert.ok((await acme.pending({ userId: "user_saved" })) >= 0);
    const ran = await acme.flushUser({ userId: "user_saved" }); // the server's own worker may be running one of them
    assert.equal(ran.failed, 0, JSON.stringify(ran));
    for (let tries = 0; (await acme.pending({ userId: "user_saved" })) > 0; tries++) {
      assert.ok(tries < 100, "the user's jobs were not done within 10 s");
      await new Promise((done) => setTimeout(done, 100));
    }
    assert.ok((await acme.search("Where did I move?", { userId: "user_saved" })).some((h) => h.text.includes("Shenzhen")));
  });

  test("history leaves out the answers a regenerated one replaced, unless asked to include them", async () => {
    const scope = { userId: "user_regen", threadId: "t" };
    await acme.add(
      [
        { id: "q1", role: "user", content: "讲个笑话" },
        { id: "a1", role: "assistant", content: "第一个笑话" },
      ],
      scope,
    );
    await acme.add([{ id: "a2", role: "assistant", content: "第二个笑话", metadata: { replaces: ["a1"] } }], scope);
    assert.deepEqual(
      (await acme.history(scope)).map((m) => m.id),
      ["q1", "a2"],
    );
    const all = await acme.history({ ...scope, replaced: "include" });
    assert.deepEqual(
      all.map((m) => [m.id, m.replaces ?? null, m.replaced_by ?? null]),
      [
        ["q1", null, null],
        ["a1", null, "a2"],
        ["a2", ["a1"], null],
      ],
    );
  });

  test("forget deletes a thread, then the whole user; what is gone is NotFound", async () => {
    await acme.add("临时的话", { userId: "user_gone", threadId: "a" });
    await acme.add("另一个会话", { userId: "user_gone", threadId: "b" });
    assert.ok((await acme.forget({ userId: "user_gone", threadId: "a" })) >= 1);
    await assert.rejects(acme.history({ userId: "user_gone", threadId: "a" }), (e) => e instanceof NotFound && e.code === "thread_not_found");
    assert.deepEqual(
      (await acme.threads({ userId: "user_gone" })).map((t) => t.thread_id),
      ["b"],
    );
    assert.ok((await acme.forget({ userId: "user_gone" })) >= 1);
    await assert.rejects(acme.threads({ userId: "user_gone" }), (e) => e instanceof NotFound && e.status === 404 && e.code === "user_not_found");
  });
});

describe("tenants and keys", () => {
  test("another tenant's key does not see the user, even with the same id", async () => {
    await assert.rejects(globex.threads({ userId: "user_001" }), (e) => e instanceof NotFound && e.code === "user_not_found");
    await globex.add("我用Go写后端", { userId: "user_001", threadId: "s1" });
    assert.deepEqual(
      (await globex.history({ userId: "user_001", threadId: "s1" })).map((m) => m.content),
      ["我用Go写后端"],
    );
    await globex.flush();
    const hits = await globex.search("后端", { userId: "user_001" });
    assert.ok(hits.length >= 1 && hits.every((h) => !h.text.includes("SpringBoot")), JSON.stringify(hits));
    assert.equal((await acme.history({ userId: "user_001", threadId: "s1" })).length, 2);
  });

  test("a wrong key and no key are Unauthorized, with the server's code", async () => {
    for (const client of [new MemstackClient(server.url, { apiKey: "not-a-key" }), new MemstackClient(server.url)]) {
      await assert.rejects(client.threads({ userId: "user_001" }), (e) => {
        assert.ok(e instanceof Unauthorized && e instanceof UsageError && e instanceof MemstackError);
        assert.equal(e.status, 401);
        assert.equal(e.code, "unauthorized");
        assert.equal(e.name, "Unauthorized");
        return true;
      });
    }
  });
});

describe("invalid input", () => {
  test("a bad message names its field, and nothing of the batch is stored", async () => {
    const batch = [
      { role: "user", content: "这条是好的" },
      { role: "robot", content: "角色不对" },
    ];
    await assert.rejects(acme.add(batch, { userId: "user_bad", threadId: "t" }), (e) => {
      assert.ok(e instanceof InvalidInput);
      assert.equal(e.status, 422);
      assert.equal(e.code, "invalid_input");
      assert.equal(e.field, "messages[1].role");
      return true;
    });
    await assert.rejects(acme.add([{ role: "user", content: "" }], { userId: "user_bad", threadId: "t" }), (e) => e instanceof InvalidInput && e.field === "messages[0].content");
    await assert.rejects(acme.threads({ userId: "user_bad" }), NotFound);
  });

  test("a time without its UTC offset, a negative budget and k = 0 name their fields", async () => {
    await assert.rejects(acme.add("hi", { userId: "u", threadId: "t", at: "2026-11-02T20:00:00" }), (e) => e instanceof InvalidInput && e.field === "at");
    await assert.rejects(acme.context({ userId: "u", threadId: "t", maxTokens: -1 }), (e) => e instanceof InvalidInput && e.field === "max_tokens");
    await assert.rejects(acme.search("后端", { userId: "u", k: 0 }), (e) => e instanceof InvalidInput && e.field === "k");
  });

  test("an empty id, or one the routes cannot carry, is refused before any request, naming the option", async () => {
    await assert.rejects(acme.history({ userId: "", threadId: "t" }), (e) => e instanceof InvalidInput && e.field === "userId" && e.message === "userId is required");
    await assert.rejects(acme.add("你好", { userId: "u", threadId: "a/b" }), (e) => e instanceof InvalidInput && e.field === "threadId");
    assert.throws(() => new MemstackClient("127.0.0.1:8000"), (e) => e instanceof InvalidInput && e.field === "baseUrl");
  });
});

test("a server that is not there is Unavailable (code unreachable), after the retries", async () => {
  const client = new MemstackClient(`http://127.0.0.1:${await freePort()}`, { retries: 1 });
  const started = Date.now();
  await assert.rejects(client.threads({ userId: "u" }), (e) => e instanceof Unavailable && e.code === "unreachable" && e.status === undefined);
  assert.ok(Date.now() - started >= 250); // one retry, after 0.25 s
});
