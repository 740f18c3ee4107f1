/**
 * @memstack/client: the memstack service from TypeScript. `MemstackClient` has the Python
 * library's method names in camelCase; failures are the typed classes of ./errors.ts; the values
 * are typed from the server's OpenAPI document (./schema.d.ts, generated: `npm run generate`).
 */
export { MemstackClient } from "./client.js";
export type {
  AddOptions,
  ClientOptions,
  ContextOptions,
  HistoryOptions,
  SearchOptions,
  ThreadScope,
  Time,
  UserScope,
} from "./client.js";
export {
  Conflict,
  errorClassFor,
  InvalidInput,
  MemstackError,
  NotFound,
  ProviderError,
  RateLimited,
  RuntimeFailure,
  ServerError,
  Unauthorized,
  Unavailable,
  UpstreamTimeout,
  UsageError,
} from "./errors.js";
export type { ErrorDetails } from "./errors.js";
export type * from "./types.js";
export type { components, operations, paths } from "./schema.js";
