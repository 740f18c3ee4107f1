"""One error tree for memstack; foreign exceptions are translated once, at the boundary.

    MemstackError
    ├── UsageError                 the caller's mistake: fix the call, retrying will not help
    │   ├── InvalidInput           bad message, scope, time, size or encoding (a ValueError)
    │   ├── BudgetError            a token budget too small for what must be kept
    │   ├── UnknownName            an unregistered layer, counter, backend or preset (a KeyError)
    │   ├── NotFound               no such user, thread or record (a LookupError)
    │   ├── Unauthorized           (a Client) the service refused the API key, or none was given
    │   ├── ForeignCollection      a vector collection memstack did not create (never used or dropped)
    │   ├── MissingDependency      an optional extra is not installed (names the pip line; an ImportError)
    │   ├── MissingAPIKey          a provider needs a key that is not set (names the variable)
    │   ├── ProviderRejected       a model API refused the request (bad key, model, URL or input)
    │   └── ProfileMismatch        (memstack.profile) a process would write with other layers or
    │                              another embedder than the store's profile (names `memstack init`)
    └── RuntimeFailure             the world failed: retrying may help
        ├── StoreError             a storage backend failed or is unreachable
        │   ├── SchemaError        a store's schema is newer than this code, or corrupt
        │   └── Unavailable        (a Client) the service is unreachable or did not answer in time
        ├── Conflict               a conditional write found the thread or note changed since it
        │                          was read: read again and decide again
        ├── JobError               a write-side job failed (kept queued for retry)
        ├── ProviderUnavailable    a model API timed out, was unreachable, rate-limited or failed
        │   └── UpstreamTimeout    (memstack.server.errors) the proxy's upstream model was too slow
        ├── ModelOutputError       a model's output still failed its schema after repair and retry
        └── ModelIntegrityError    a local model file does not match its pinned checksum

Every error has a stable ``code``: the CLI's JSON output and the HTTP API's error body
(``{"error": {"code", "message", "field"}}``) carry it; ``memstack.server.errors`` maps each class
to its HTTP status (422, 404, 409, 400, 501, 502, 503, 504).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType


class MemstackError(Exception):
    """Base of every error raised by memstack."""

    code = "memstack_error"


class UsageError(MemstackError):
    """The caller's mistake; the same call will fail again."""

    code = "usage_error"


class InvalidInput(UsageError, ValueError):
    """A value failed validation (message, scope, timestamp, size, encoding)."""

    code = "invalid_input"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class BudgetError(UsageError):
    """A token budget cannot hold what must be kept (e.g. the system prompt alone)."""

    code = "budget_too_small"


class UnknownName(UsageError, KeyError):
    """A name that no registry knows (layer, token counter, backend URL scheme)."""

    code = "unknown_name"

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class NotFound(UsageError, LookupError):
    """A user or thread the tenant does not have: REST answers 404 and the CLI exits 1, rather
    than an empty answer that reads like an existing user without data (a mistyped id)."""

    code = "not_found"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class Unauthorized(UsageError):
    """The memstack service refused the request's API key, or none was given (its 401): a
    ``memstack.Client`` with another key, or none, for a server without keys."""

    code = "unauthorized"


class ForeignCollection(UsageError):
    """A vector collection of the name memstack was given exists but was not made by memstack
    (another schema, another application's data): it is never written to, reset or dropped."""

    code = "foreign_collection"


class MissingDependency(UsageError, ImportError):
    """An optional dependency is missing; the message carries the exact install command."""

    code = "missing_dependency"

    def __init__(self, package: str, extra: str) -> None:
        self.install = f'pip install "memstack[{extra}]"'
        super().__init__(f"{package} is not installed; install it with: {self.install}")


class RuntimeFailure(MemstackError):
    """Something outside the caller's control failed; retrying may succeed."""

    code = "runtime_failure"


class StoreError(RuntimeFailure):
    """A storage backend failed (I/O error, lost connection, locked database)."""

    code = "store_error"


class Conflict(RuntimeFailure):
    """A conditional write found the thread changed since it was read (another request wrote to
    it first); read again and decide again."""

    code = "conflict"


class SchemaError(StoreError):
    """A store's schema is unknown to this version of memstack."""

    code = "schema_error"


class Unavailable(StoreError):
    """The memstack service could not be reached, or did not answer within the client's timeout,
    after the client's retries (connection refused, reset, timed out): to a ``memstack.Client`` the
    service is its store, so code that handles a Memory's ``StoreError`` handles it unchanged."""

    code = "unavailable"


class JobError(RuntimeFailure):
    """A write-side job failed; it stays queued and is retried with backoff."""

    code = "job_error"


class MissingAPIKey(UsageError):
    """A provider that needs an API key has none: the message names the environment variable."""

    code = "missing_api_key"

    def __init__(self, provider: str, env: str | None) -> None:
        self.env = env
        where = f"set {env} or pass api_key=" if env else "pass api_key="
        super().__init__(f"{provider} needs an API key: {where}")


class ProviderRejected(UsageError):
    """A model API refused the request (bad key, unknown model or URL, invalid input)."""

    code = "provider_rejected"


class ProviderUnavailable(RuntimeFailure):
    """A model API timed out, was unreachable, rate-limited us, failed (5xx) or answered nonsense."""

    code = "provider_unavailable"


class ModelOutputError(RuntimeFailure):
    """A model's structured output failed its schema even after repair and one retry.

    ``raw`` keeps the last output so that the failure can be recorded; the job stays queued.
    """

    code = "model_output_error"

    def __init__(self, message: str, *, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class ModelIntegrityError(RuntimeFailure):
    """A local model file's sha256 does not match the pinned one: it is refused, never loaded."""

    code = "model_integrity_error"


@contextmanager
def importing(package: str, extra: str) -> Iterator[None]:
    """A block of imports from an optional dependency: an ImportError in it is raised as
    MissingDependency naming the extra to install (``require`` does the same for one module)."""
    try:
        yield
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise MissingDependency(package, extra) from exc


def require(module: str, *, extra: str, package: str | None = None) -> ModuleType:
    """Import an optional dependency or raise MissingDependency naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependency(package or module, extra) from exc
