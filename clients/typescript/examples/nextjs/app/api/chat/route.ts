// app/api/chat/route.ts: a chat endpoint with memory. The context for the user's question comes
// from memstack (what they said in any earlier conversation, within a token budget), the answer
// streams from any OpenAI-compatible model, and the round is stored when the answer is whole.
import OpenAI from "openai";
import { InvalidInput, MemstackClient } from "@memstack/client";

const memory = new MemstackClient(process.env.MEMSTACK_URL ?? "http://127.0.0.1:8000", {
  apiKey: process.env.MEMSTACK_API_KEY, // the key picks the tenant
});
const llm = new OpenAI(); // OPENAI_API_KEY and OPENAI_BASE_URL: any OpenAI-compatible model
const model = process.env.CHAT_MODEL ?? "gpt-4o-mini";

export async function POST(request: Request): Promise<Response> {
  // in a real app the user comes from your session, never from the request body
  const { userId, threadId, message } = (await request.json()) as { userId: string; threadId: string; message: string };
  if (!message?.trim()) return Response.json({ error: { code: "invalid_input", field: "message" } }, { status: 422 });
  try {
    const ctx = await memory.context({ userId, threadId, query: message, maxTokens: 3000 });
    const stream = await llm.chat.completions.create({ model, messages: ctx.toOpenAI(), stream: true });
    const encoder = new TextEncoder();
    let answer = "";
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        for await (const chunk of stream) {
          const text = chunk.choices[0]?.delta?.content ?? "";
          answer += text;
          controller.enqueue(encoder.encode(text));
        }
        // stored once the answer is whole: a stream cut short stores nothing
        await memory.add(
          [
            { role: "user", content: message },
            { role: "assistant", content: answer },
          ],
          { userId, threadId },
        );
        controller.close();
      },
    });
    return new Response(body, { headers: { "Content-Type": "text/plain; charset=utf-8" } });
  } catch (error) {
    if (error instanceof InvalidInput) {
      // the caller's mistake (an id too long, a message too large): say which field
      return Response.json({ error: { code: error.code, field: error.field, message: error.message } }, { status: 422 });
    }
    throw error;
  }
}
