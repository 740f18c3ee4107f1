/**
 * The values the client sends and returns, by their library names, each an alias of a schema in
 * the server's OpenAPI document (src/schema.d.ts, generated): when the server changes a shape, the
 * regenerated types change these and `tsc` shows every use that no longer fits.
 */
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];

/** A message to store: OpenAI-shaped, with an optional id, timestamp and metadata. */
export type MessageIn = Schemas["MessageIn"];
/** What `add` accepts per message: a MessageIn, or a plain string as a user message (as `Memory.add` does). */
export type MessageLike = MessageIn | string;
/** A stored message: its id, timestamp and place (`seq`) in the thread. */
export type Message = Schemas["MessageOut"];
export type Thread = Schemas["ThreadOut"];
/** A search hit: a unit of the user's memory, its score (higher is better) and its thread. */
export type Hit = Schemas["HitOut"];
/** A model-made record (summary, entity, relation, state) as it is now. */
export type MemoryRecord = Schemas["RecordOut"];
/** "summary" (of a thread), "entity", "relation" or "state" */
export type RecordKind = paths["/v1/users/{user_id}/memories/{kind}"]["get"]["parameters"]["path"]["kind"];
export type AuditEvent = Schemas["AuditOut"];
export type Usage = Schemas["UsageOut"];
export type Deletion = Schemas["DeletionOut"];
export type Imported = Schemas["Imported"];
export type Health = Schemas["Health"];
export type ToolResult = Schemas["ToolResult"];
export type ContextRequest = Schemas["ContextRequest"];
export type Dropped = Schemas["DroppedOut"];
/** A saved memory (a tool's note or key/value memory), as `forgetSaved` deleted it. */
export type SavedMemory = Schemas["SavedOut"];
/** What running a user's ready jobs did (`flushUser`). */
export type JobsRun = Schemas["JobsRun"];

/** A part of a message's content, as OpenAI's chat API takes it. */
export type ContentPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string; detail?: "auto" | "low" | "high" } };

/** A tool call of an assistant message, as OpenAI's chat API takes it. */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/**
 * One message of a context, as any OpenAI-compatible chat API takes it: assignable to the openai
 * package's `ChatCompletionMessageParam` without a cast.
 */
export type ChatMessage =
  | { role: "system"; content: string; name?: string }
  | { role: "user"; content: string | ContentPart[]; name?: string }
  | { role: "assistant"; content?: string | null; name?: string; tool_calls?: ToolCall[] }
  | { role: "tool"; content: string; tool_call_id: string };

/**
 * The context for the next model call (`Memory.context`): `messages` (system messages, one system
 * message of memory, the conversation as the layers shaped it, the query last), their `tokens`
 * under `counter`, the tokens per memory section, and what was `dropped` to fit `max_tokens`.
 */
export interface Context extends Omit<Schemas["ContextOut"], "messages"> {
  messages: ChatMessage[];
  /** the user's write-side jobs not run yet when it was built: messages it may not reflect yet */
  pending: number;
  /** the messages for any OpenAI-compatible chat API (the same array as `messages`) */
  toOpenAI(): ChatMessage[];
}
