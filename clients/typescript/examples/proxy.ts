// proxy.ts: memory through the proxy with the official openai package: only the base URL changes
import OpenAI from "openai";

const url = process.env.MEMSTACK_URL ?? "http://127.0.0.1:8000";
const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: process.env.MEMSTACK_API_KEY ?? "not-needed" });
const ask = (thread: string, content: string) =>
  openai.chat.completions.create(
    { model: "local", user: "user_001", messages: [{ role: "user", content }], stream: true }, // whose memory: `user`
    { headers: { "X-Memstack-Thread": thread } }, // which thread
  );

for await (const chunk of await ask("s1", "我正在开发一个知识中台，后端使用SpringBoot")) {
  process.stdout.write(chunk.choices[0]?.delta?.content ?? "");
}
console.log();
for await (const chunk of await ask("s2", "我的后端使用什么技术？")) {
  process.stdout.write(chunk.choices[0]?.delta?.content ?? ""); // a new session, streamed: -> SpringBoot
}
console.log();
