/**
 * The service's errors as typed classes, one tree as the Python library draws it
 * (`memstack.errors`), so that code can `catch (e) { if (e instanceof NotFound) ... }`:
 *
 *     MemstackError                 every failure; `status`, `code`, `field` as the server sent them
 *     ├── UsageError                the caller's mistake: the same call fails again (400)
 *     │   ├── InvalidInput          422 (and 413: a body too large); `field` names the request field
 *     │   │                         at fault, an item of a list by its index: "messages[0].role"
 *     │   ├── NotFound              404: user_not_found, thread_not_found, record_not_found
 *     │   └── Unauthorized          401: no API key, or one the server does not know
 *     └── RuntimeFailure            the world failed: retrying may help
 *         ├── Conflict              409: it changed since it was read; read it again
 *         ├── RateLimited           429: past the tenant's answer budget; `retryAfter` in seconds
 *         ├── ProviderError         502: the upstream model failed (the proxy)
 *         │   └── UpstreamTimeout   504: the upstream model was too slow
 *         ├── Unavailable           503 (the store is unreachable, the service is starting),
 *         │                         408, or no answer at all: the connection failed (`code`
 *         │                         "unreachable") or the client's timeout passed ("timeout")
 *         └── ServerError           500 and any other status
 *
 * The server's error body is `{"error": {"code", "message", "field"}}` (memstack.server.errors);
 * `code` is the error tree's stable code ("invalid_input", "user_not_found", ...).
 */

/** What every error carries: the HTTP status (undefined when no answer came), the server's code and field. */
export interface ErrorDetails {
  status?: number;
  code: string;
  field?: string | null;
  /** seconds, from a 429's Retry-After */
  retryAfter?: number;
  cause?: unknown;
}

export class MemstackError extends Error {
  /** the HTTP status; undefined when the request got no answer */
  readonly status: number | undefined;
  /** the error tree's stable code, e.g. "invalid_input", "user_not_found", "unauthorized" */
  readonly code: string;
  /** the request field at fault, e.g. "messages[0].role"; null when none is */
  readonly field: string | null;

  constructor(message: string, details: ErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.status = details.status;
    this.code = details.code;
    this.field = details.field ?? null;
  }
}

export class UsageError extends MemstackError {}
export class InvalidInput extends UsageError {}
export class NotFound extends UsageError {}
export class Unauthorized extends UsageError {}

export class RuntimeFailure extends MemstackError {}
export class Conflict extends RuntimeFailure {}
export class Unavailable extends RuntimeFailure {}
export class ServerError extends RuntimeFailure {}
export class ProviderError extends RuntimeFailure {}
export class UpstreamTimeout extends ProviderError {}

export class RateLimited extends RuntimeFailure {
  /** seconds to wait before asking again (the Retry-After header), if the server said */
  readonly retryAfter: number | undefined;

  constructor(message: string, details: ErrorDetails) {
    super(message, details);
    this.retryAfter = details.retryAfter;
  }
}

type ErrorClass = new (message: string, details: ErrorDetails) => MemstackError;

const BY_STATUS: Record<number, ErrorClass> = {
  400: UsageError,
  401: Unauthorized,
  404: NotFound,
  408: Unavailable,
  409: Conflict,
  413: InvalidInput,
  422: InvalidInput,
  429: RateLimited,
  502: ProviderError,
  503: Unavailable,
  504: UpstreamTimeout,
};

/** The error class for a status: the table above, else UsageError for another 4xx and ServerError for the rest. */
export function errorClassFor(status: number): ErrorClass {
  return BY_STATUS[status] ?? (status >= 400 && status < 500 ? UsageError : ServerError);
}

/**
 * The error a non-2xx response stands for, from its status and the server's error body. A body
 * that is not the service's shape (a proxy in between, an HTML page) still gives the right class,
 * with the code `http_STATUS` and the body's start as the message.
 */
export async function errorFromResponse(response: Response): Promise<MemstackError> {
  const text = await response.text();
  let detail: { code?: unknown; message?: unknown; field?: unknown } | undefined;
  try {
    detail = (JSON.parse(text) as { error?: typeof detail }).error;
  } catch {
    detail = undefined;
  }
  const code = typeof detail?.code === "string" ? detail.code : `http_${response.status}`;
  const message = typeof detail?.message === "string" ? detail.message : text.slice(0, 200) || response.statusText;
  const field = typeof detail?.field === "string" ? detail.field : null;
  const retry = Number(response.headers.get("retry-after"));
  const Class = errorClassFor(response.status);
  return new Class(message, {
    status: response.status,
    code,
    field,
    retryAfter: Number.isFinite(retry) && retry >= 0 && response.headers.has("retry-after") ? retry : undefined,
  });
}
