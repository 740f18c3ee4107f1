/**
 * MemstackClient: the memstack service's REST API with the Python library's method names
 * (`Memory.add`, `context`, `search`, `history`, `threads`, `forget`, ...), in camelCase, their
 * keyword arguments as one options object (`user_id=` -> `{ userId }`).
 *
 * Every call is one `fetch` of a route of the server's OpenAPI document: the routes, bodies and
 * answers are typed from src/schema.d.ts (generated from the document), so a route or a field
 * the server no longer has fails the build. Everything is scoped to the tenant of the API key.
 *
 * Decisions:
 * - Failures are thrown as the classes of ./errors.ts, carrying the server's `code` and `field`.
 * - Retries: a call that is safe to send twice (reads, state puts, contexts, searches, imports,
 *   and adds, which carry an automatic `Idempotency-Key`: a retried add is stored once) is
 *   retried `retries` times (default 2) when no answer came, the client's timeout passed, or the
 *   server answered 503, after 0.25 s, then 0.5 s. Deletes and tool calls are sent once.
 * - No runtime dependency: the platform's `fetch` (Node 20+, browsers, edge runtimes), or yours.
 */
import {
  errorFromResponse,
  InvalidInput,
  MemstackError,
  Unavailable,
} from "./errors.js";
import type { paths } from "./schema.js";
import type {
  AuditEvent,
  ChatMessage,
  Context,
  Deletion,
  Health,
  Hit,
  Imported,
  JobsRun,
  MemoryRecord,
  Message,
  MessageLike,
  RecordKind,
  SavedMemory,
  Thread,
  ToolResult,
  Usage,
} from "./types.js";

export interface ClientOptions {
  /** the API key (sent as `Authorization: Bearer KEY`): it picks the tenant; none for a server without keys */
  apiKey?: string;
  /** milliseconds a request may take before it fails with Unavailable (code "timeout"); default 30 000 */
  timeoutMs?: number;
  /** how many times a call that is safe to repeat is retried when it got no answer or a 503; default 2 */
  retries?: number;
  /** the fetch to use (default: the global one) */
  fetch?: typeof fetch;
  /** headers sent with every request */
  headers?: Record<string, string>;
}

/** A time: a Date, or an ISO 8601 string with a UTC offset (the server refuses one without). */
export type Time = Date | string;

export interface UserScope {
  userId: string;
}
export interface ThreadScope extends UserScope {
  threadId: string;
}

export interface AddOptions extends ThreadScope {
  /** the time of messages that carry no timestamp (default: now) */
  at?: Time;
  /** a key that makes a retry of this add store nothing (default: a fresh random one per call) */
  idempotencyKey?: string;
}

export interface ContextOptions extends ThreadScope {
  /** the user's next message (not stored), appended last; also what retrieval looks for */
  query?: string;
  at?: Time;
  /** a comma-separated stack of layers, e.g. "window,retrieval" (default: the server's) */
  strategy?: string;
  /** one of the articles' scenario stacks instead of `strategy` */
  preset?: string;
  /** the whole context's token budget; null: unbounded; left out: the server's */
  maxTokens?: number | null;
  /** token counter: "estimate", "cl100k_base", "o200k_base" or a model name */
  counter?: string;
  /** turns the window layer keeps */
  k?: number;
  /** units the retrieval layer returns at most */
  topK?: number;
  /** raw turns the summary-buffer layer keeps, in tokens */
  bufferTokens?: number;
  /** relations the graph layer follows (0 to 3) */
  hops?: number;
}

export interface SearchOptions extends UserScope {
  /** hits at most (1 to 100, default 8) */
  k?: number;
  /** reference time for dates the query names (default: now) */
  at?: Time;
  /** only these threads */
  threadIds?: string[];
}

export interface HistoryOptions extends ThreadScope {
  /** only the last n */
  last?: number;
  /** only messages dated at or before this time */
  at?: Time;
  /**
   * "include": also the answers a regenerated one replaced, each message naming `replaces` and
   * `replaced_by`; by default the thread as the user sees it, without them
   */
  replaced?: "exclude" | "include";
}

type Method = "get" | "post" | "put" | "delete";
type Path = keyof paths;
type Present<T> = [NonNullable<T>] extends [never] ? never : NonNullable<T>;
type MethodOf<P extends Path> = { [M in Method]: [Present<paths[P][M]>] extends [never] ? never : M }[Method];
type Operation<P extends Path, M extends Method> = Present<paths[P][M]>;
type PathParams<O> = O extends { parameters: { path: infer T } } ? T : never;
type QueryParams<O> = O extends { parameters: { query?: infer T } } ? T : never;
type JsonBody<O> = O extends { requestBody: { content: { "application/json": infer T } } }
  ? T
  : O extends { requestBody?: { content: { "application/json": infer T } } }
    ? T
    : never;
type JsonAnswer<O> = O extends { responses: { 200: { content: { "application/json": infer T } } } }
  ? T
  : O extends { responses: { 201: { content: { "application/json": infer T } } } }
    ? T
    : never;

interface Request<O> {
  path?: PathParams<O>;
  query?: QueryParams<O>;
  body?: JsonBody<O>;
  headers?: Record<string, string>;
  /** safe to send twice: retried when no answer came or the server answered 503 */
  retry?: boolean;
  /** given the headers of the answer (a success) */
  onHeaders?: (headers: Headers) => void;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_RETRIES = 2;
/** the header of a context or search answer: the user's write-side jobs not run yet */
const PENDING_HEADER = "X-Memstack-Pending-Jobs";

export class MemstackClient {
  /** the service's address, without a trailing "/v1" */
  readonly baseUrl: string;
  private readonly options: Required<Omit<ClientOptions, "apiKey" | "headers">> & Pick<ClientOptions, "apiKey" | "headers">;

  /**
   * @param baseUrl the service, e.g. "http://127.0.0.1:8000" (the proxy's "http://.../v1" works too)
   */
  constructor(baseUrl: string, options: ClientOptions = {}) {
    if (!/^https?:\/\//.test(baseUrl)) {
      throw new InvalidInput(`baseUrl must be an http(s):// URL, got ${JSON.stringify(baseUrl)}`, { code: "invalid_input", field: "baseUrl" });
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
    this.options = {
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      retries: options.retries ?? DEFAULT_RETRIES,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      apiKey: options.apiKey,
      headers: options.headers,
    };
  }

  // ---- messages --------------------------------------------------------------------------

  /** Store messages in a thread (`Memory.add`); returns the stored ones. The layers' work is queued. */
  async add(messages: MessageLike | MessageLike[], options: AddOptions): Promise<Message[]> {
    const batch = (Array.isArray(messages) ? messages : [messages]).map((m) => (typeof m === "string" ? { role: "user" as const, content: m } : m));
    const answer = await this.call("post", "/v1/users/{user_id}/threads/{thread_id}/messages", {
      path: { user_id: options.userId, thread_id: options.threadId },
      body: { messages: batch, at: time(options.at) },
      headers: { "Idempotency-Key": options.idempotencyKey ?? globalThis.crypto.randomUUID() },
      retry: true,
    });
    return answer.stored;
  }

  /** A thread's messages in time order (`Memory.history`); NotFound for a thread the user does not have. */
  async history(options: HistoryOptions): Promise<Message[]> {
    return this.call("get", "/v1/users/{user_id}/threads/{thread_id}/messages", {
      path: { user_id: options.userId, thread_id: options.threadId },
      query: { last: options.last, at: time(options.at), replaced: options.replaced },
      retry: true,
    });
  }

  /** The user's threads, most recent activity first (`Memory.threads`). */
  async threads(options: UserScope): Promise<Thread[]> {
    return this.call("get", "/v1/users/{user_id}/threads", { path: { user_id: options.userId }, retry: true });
  }

  /** Delete one thread with everything keyed to it, or (no threadId) the whole user (`Memory.forget`); returns the rows deleted. */
  async forget(options: UserScope & { threadId?: string }): Promise<number> {
    const answer =
      options.threadId === undefined
        ? await this.call("delete", "/v1/users/{user_id}", { path: { user_id: options.userId } })
        : await this.call("delete", "/v1/users/{user_id}/threads/{thread_id}", {
            path: { user_id: options.userId, thread_id: options.threadId },
          });
    return answer.deleted;
  }

  /** Delete one saved memory (a tool's note or key/value memory) by id (`Memory.forget_saved`); returns what was deleted. */
  async forgetSaved(options: UserScope & { memoryId: string }): Promise<SavedMemory> {
    return this.call("delete", "/v1/users/{user_id}/saved/{memory_id}", {
      path: { user_id: options.userId, memory_id: options.memoryId },
    });
  }

  // ---- context and search ----------------------------------------------------------------

  /** The messages to send to the model next (`Memory.context`), within the token budget. */
  async context(options: ContextOptions): Promise<Context> {
    const { userId, threadId, at, maxTokens, topK, bufferTokens, ...rest } = options;
    const body = defined({ ...rest, at: time(at), top_k: topK, buffer_tokens: bufferTokens });
    let pending = 0;
    const answer = await this.call("post", "/v1/users/{user_id}/threads/{thread_id}/context", {
      path: { user_id: userId, thread_id: threadId },
      body: maxTokens === undefined ? body : { ...body, max_tokens: maxTokens },
      retry: true,
      onHeaders: (headers) => (pending = Number(headers.get(PENDING_HEADER) ?? 0)),
    });
    const messages = answer.messages as unknown as ChatMessage[];
    return { ...answer, messages, pending, toOpenAI: () => messages };
  }

  /** The user's memories most relevant to `query`, across threads, best first (`Memory.search`). */
  async search(query: string, options: SearchOptions): Promise<Hit[]> {
    return this.call("post", "/v1/users/{user_id}/search", {
      path: { user_id: options.userId },
      body: defined({ query, k: options.k, at: time(options.at), thread_ids: options.threadIds }),
      retry: true,
    });
  }

  // ---- model-made memory ---------------------------------------------------------------------

  /** The current model-made records of a kind (`Memory.memories`); summaries need the thread. */
  async memories(kind: RecordKind, options: UserScope & { threadId?: string }): Promise<MemoryRecord[]> {
    return this.call("get", "/v1/users/{user_id}/memories/{kind}", {
      path: { user_id: options.userId, kind },
      query: { thread_id: options.threadId },
      retry: true,
    });
  }

  /** Delete a record (audited; its history is kept); NotFound when there is no such current record. */
  async deleteMemory(kind: RecordKind, key: string, options: UserScope & { threadId?: string }): Promise<number> {
    const answer = await this.call("delete", "/v1/users/{user_id}/memories/{kind}/{key}", {
      path: { user_id: options.userId, kind, key },
      query: { thread_id: options.threadId },
    });
    return answer.deleted;
  }

  /** Set an entity's attribute to one current value (the values it replaces become past ones). */
  async setAttribute(entity: string, attribute: string, value: string, options: UserScope): Promise<MemoryRecord> {
    return this.call("put", "/v1/users/{user_id}/memories/entity/{key}/attributes/{attribute}", {
      path: { user_id: options.userId, key: entity, attribute },
      body: { value },
      retry: true,
    });
  }

  /** Remove an entity's attribute (its values stay in the record's history); returns the entity. */
  async deleteAttribute(entity: string, attribute: string, options: UserScope): Promise<MemoryRecord> {
    return this.call("delete", "/v1/users/{user_id}/memories/entity/{key}/attributes/{attribute}", {
      path: { user_id: options.userId, key: entity, attribute },
    });
  }

  /** Rewrite note `index` of the thread's summary; Conflict if its text is no longer `expect`. */
  async editNote(index: number, text: string, options: ThreadScope & { expect: string }): Promise<MemoryRecord> {
    return this.call("put", "/v1/users/{user_id}/threads/{thread_id}/summary/notes/{index}", {
      path: { user_id: options.userId, thread_id: options.threadId, index },
      body: { text, expect: options.expect },
      retry: true,
    });
  }

  /** Remove note `index` of the thread's summary; Conflict if its text is no longer `expect`. */
  async deleteNote(index: number, options: ThreadScope & { expect: string }): Promise<MemoryRecord> {
    return this.call("delete", "/v1/users/{user_id}/threads/{thread_id}/summary/notes/{index}", {
      path: { user_id: options.userId, thread_id: options.threadId, index },
      query: { expect: options.expect },
    });
  }

  /** The user's JSON state as one object, key -> value. */
  async state(options: UserScope): Promise<Record<string, unknown>> {
    return this.call("get", "/v1/users/{user_id}/state", { path: { user_id: options.userId }, retry: true });
  }

  /** One key of the user's state: the value itself; NotFound when the key is not set. */
  async getState(key: string, options: UserScope): Promise<unknown> {
    const record = await this.call("get", "/v1/users/{user_id}/state/{key}", { path: { user_id: options.userId, key }, retry: true });
    return record.value;
  }

  /** Set a key of the user's state to any JSON value (audited); returns the record. */
  async setState(key: string, value: unknown, options: UserScope): Promise<MemoryRecord> {
    return this.call("put", "/v1/users/{user_id}/state/{key}", { path: { user_id: options.userId, key }, body: { value }, retry: true });
  }

  /** Every add, supersede and delete of the user's model-made memory, newest first (`Memory.audit`). */
  async audit(options: UserScope & { kind?: RecordKind; limit?: number }): Promise<AuditEvent[]> {
    return this.call("get", "/v1/users/{user_id}/audit", {
      path: { user_id: options.userId },
      query: { kind: options.kind, limit: options.limit },
      retry: true,
    });
  }

  /** The model calls made for the user: totals and every call (`Memory.usage`). */
  async usage(options: UserScope): Promise<Usage> {
    return this.call("get", "/v1/users/{user_id}/usage", { path: { user_id: options.userId }, retry: true });
  }

  // ---- export, import, deletions ---------------------------------------------------------------

  /** Every message of the user, thread by thread, then their saved memories (`Memory.export`). */
  async export(options: UserScope): Promise<Array<Record<string, unknown>>> {
    const answer = await this.call("get", "/v1/users/{user_id}/export", { path: { user_id: options.userId }, retry: true });
    return answer.records;
  }

  /** Store exported records into the user (`Memory.import_`); importing twice adds nothing. */
  async import(records: Array<Record<string, unknown>>, options: UserScope): Promise<Imported> {
    return this.call("post", "/v1/users/{user_id}/import", { path: { user_id: options.userId }, body: { records }, retry: true });
  }

  /** The tenant's deletion notes (or one user's): what was forgotten, when, by whom; no content. */
  async deletions(options: { userId?: string; limit?: number } = {}): Promise<Deletion[]> {
    return this.call("get", "/v1/deletions", { query: { user_id: options.userId, limit: options.limit }, retry: true });
  }

  // ---- tools and service -------------------------------------------------------------------

  /** The memory tools as OpenAI function-calling schemas (`form: "key-value"`: the articles' save_memory(key, value)). */
  async tools(options: { form?: "notes" | "key-value" } = {}): Promise<Array<Record<string, unknown>>> {
    return this.call("get", "/v1/tools", { query: { form: options.form }, retry: true });
  }

  /** Run one memory tool for a user, as a model's tool call would; returns the text for the model. */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    options: UserScope & { threadId?: string; form?: "notes" | "key-value" },
  ): Promise<string> {
    const answer: ToolResult = await this.call("post", "/v1/users/{user_id}/tools/{name}", {
      path: { user_id: options.userId, name },
      query: { thread_id: options.threadId, form: options.form },
      body: { arguments: args },
    });
    return answer.result;
  }

  /** The service's health: `{status: "ok", pending_jobs}` when ready; Unavailable (503) while starting or stopping. */
  async health(): Promise<Health> {
    return this.call("get", "/health", { retry: true });
  }

  /**
   * The service's write-side jobs not run yet, every user's (`Memory.pending()`): messages added
   * but not yet indexed or extracted, which a context or search may miss. One user's count comes
   * with each context, as `Context.pending`.
   */
  async pending(options: Partial<UserScope> = {}): Promise<number> {
    if (options.userId !== undefined) {
      const answer = await this.call("get", "/v1/users/{user_id}/pending", { path: { user_id: options.userId }, retry: true });
      return answer.pending;
    }
    return (await this.health()).pending_jobs;
  }

  /** Run one user's ready write-side jobs on the server now (`Memory.flush(user_id=...)`). */
  async flushUser(options: UserScope): Promise<JobsRun> {
    return this.call("post", "/v1/users/{user_id}/flush", { path: { user_id: options.userId }, retry: true });
  }

  /**
   * Wait until the service's worker has run every queued job (`Memory.flush()` runs them in
   * process; here the server's worker does), polling every `pollMs`; Unavailable (code
   * "timeout") after `timeoutMs`. For demos and tests: an app need not wait, a context built
   * meanwhile has what is indexed so far. A server run with `--no-worker` drains only while
   * `memstack worker` processes run.
   */
  async flush(options: { timeoutMs?: number; pollMs?: number } = {}): Promise<void> {
    const { timeoutMs = 30_000, pollMs = 100 } = options;
    const deadline = Date.now() + timeoutMs;
    for (let left = await this.pending(); left > 0; left = await this.pending()) {
      if (Date.now() >= deadline) {
        throw new Unavailable(`${left} jobs still queued after ${timeoutMs} ms`, { code: "timeout" });
      }
      await sleep(pollMs);
    }
  }

  // ---- the one request -------------------------------------------------------------------------

  private async call<P extends Path, M extends MethodOf<P>>(
    method: M,
    path: P,
    request: Request<Operation<P, M>>,
  ): Promise<JsonAnswer<Operation<P, M>>> {
    const url = this.url(path, request.path as Record<string, string | number> | undefined, request.query as Query | undefined);
    const init: RequestInit = {
      method: method.toUpperCase(),
      headers: {
        Accept: "application/json",
        ...(request.body === undefined ? {} : { "Content-Type": "application/json" }),
        ...(this.options.apiKey ? { Authorization: `Bearer ${this.options.apiKey}` } : {}),
        ...this.options.headers,
        ...request.headers,
      },
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
    };
    const attempts = request.retry ? this.options.retries + 1 : 1;
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.send(url, init, request.onHeaders)) as JsonAnswer<Operation<P, M>>;
      } catch (error) {
        if (attempt >= attempts || !(error instanceof Unavailable) || error.status === 408) throw error;
        await sleep(250 * 2 ** (attempt - 1));
      }
    }
  }

  private async send(url: string, init: RequestInit, onHeaders?: (headers: Headers) => void): Promise<unknown> {
    let response: Response;
    try {
      response = await this.options.fetch(url, { ...init, signal: AbortSignal.timeout(this.options.timeoutMs) });
    } catch (error) {
      throw unreachable(error, url, this.options.timeoutMs);
    }
    if (!response.ok) throw await errorFromResponse(response);
    onHeaders?.(response.headers);
    return response.json();
  }

  private url(template: string, params: Record<string, string | number> | undefined, query: Query | undefined): string {
    const path = template.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = params?.[name];
      if (value === undefined || value === null || value === "") {
        throw new InvalidInput(`${camel(name)} is required`, { code: "invalid_input", field: camel(name) });
      }
      if (typeof value === "string" && value.includes("/")) {
        // the server routes on the decoded path: an encoded "/" would split the id (a 404 of no route)
        throw new InvalidInput(`${camel(name)} ${JSON.stringify(value)}: the REST API cannot address an id with "/"`, {
          code: "invalid_input",
          field: camel(name),
        });
      }
      return encodeURIComponent(String(value));
    });
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) search.append(key, String(value));
    }
    const qs = search.toString();
    return `${this.baseUrl}${path}${qs ? `?${qs}` : ""}`;
  }
}

type Query = Record<string, string | number | boolean | null | undefined>;

function time(value: Time | undefined): string | undefined {
  return value instanceof Date ? value.toISOString() : value;
}

function defined<T extends Record<string, unknown>>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function camel(name: string): string {
  return name.replace(/_(\w)/g, (_, c: string) => c.toUpperCase());
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A request that got no answer: the connection failed, or the client's timeout passed. */
function unreachable(error: unknown, url: string, timeoutMs: number): MemstackError {
  const name = (error as { name?: string } | null)?.name;
  if (name === "TimeoutError" || name === "AbortError") {
    return new Unavailable(`no answer from ${url} within ${timeoutMs} ms`, { code: "timeout", cause: error });
  }
  const reason = (error as { cause?: { code?: string; message?: string } } | null)?.cause;
  return new Unavailable(`cannot reach ${url}: ${reason?.code ?? reason?.message ?? String(error)}`, { code: "unreachable", cause: error });
}
