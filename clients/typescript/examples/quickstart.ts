// quickstart.ts: a user's memory across sessions, from TypeScript, against `memstack serve`
import { InvalidInput, MemstackClient } from "@memstack/client";

const memory = new MemstackClient(process.env.MEMSTACK_URL ?? "http://127.0.0.1:8000", {
  apiKey: process.env.MEMSTACK_API_KEY, // none for a server without keys
});

await memory.add(
  [
    { role: "user", content: "我正在开发一个知识中台，后端使用SpringBoot" },
    { role: "assistant", content: "好的，记住了。" },
  ],
  { userId: "user_001", threadId: "s1" },
);
await memory.flush(); // the server indexes new messages in the background; a demo waits for it

const ctx = await memory.context({ userId: "user_001", threadId: "s2", query: "我的后端使用什么技术？", maxTokens: 1000 });
console.log(ctx.messages[0]?.content); // 以下是从历史对话中检索到的相关记忆…  [2026-12-05 周六]  用户: 我正在开发一个知识中台，后端使用SpringBoot ...
// ctx.toOpenAI(): the messages for any OpenAI-compatible chat API; ctx.tokens, ctx.sections, ctx.dropped

const hits = await memory.search("后端框架", { userId: "user_001", k: 3 });
console.log(hits[0]?.text, hits[0]?.thread_id); // 用户: 我正在开发一个知识中台，后端使用SpringBoot  助手: 好的，记住了。 s1

try {
  await memory.add([{ role: "user", content: "   " }], { userId: "user_001", threadId: "s1" });
} catch (error) {
  if (error instanceof InvalidInput) console.log(error.code, error.field); // invalid_input messages[0].content
}
