import itertools
import json
import multiprocessing
import time
from pathlib import Path

import pytest

from memstack.backends.jsonl import JsonlStore, decode_name, encode_name
from memstack.errors import InvalidInput, SchemaError
from memstack.testing import A, StoreContract, msg
from memstack.types import Scope

ODD_IDS = ["a/b", "..", ".", "_", "_seq", "李四 的 线程", "con", "T1", "t1", "%41", "x.jsonl", "a\\b", "🌤"]


class TestJsonlStore(StoreContract):
    durable = True
    fair_claims = False

    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.root = tmp_path / "store"

    def new_store(self):
        return JsonlStore(self.root)

    def reopen(self, store):
        store.close()
        return JsonlStore(self.root)


def texts(store: JsonlStore, scope: Scope = A) -> list[str]:
    return [m.text for m in store.history.read(scope)]


def test_names_encode_reversibly_into_one_safe_file_name():
    assert encode_name("user_001") == "user_001"
    for name in ODD_IDS:
        encoded = encode_name(name)
        assert decode_name(encoded) == name
        assert not encoded.startswith(("_", ".")) and not any(c in encoded for c in "/\\. ")
    assert encode_name("T1").lower() != encode_name("t1").lower()


def test_odd_ids_round_trip_and_stay_inside_the_root(tmp_path):
    root = tmp_path / "root"
    store = JsonlStore(root)
    user = Scope(tenant="../租户", user_id="a/../b", agent_id="..")
    for i, thread in enumerate(ODD_IDS):
        store.history.append(user.thread(thread), [msg("user", f"第{i}条", i)], enqueue=["probe"])
        store.state.put(user.thread(thread), {"i": i})
        store.checkpoints.save(user.thread(thread), {"i": i})
    assert sorted(t.thread_id for t in store.history.threads(user.user())) == sorted(ODD_IDS)
    assert {t.agent_id for t in store.history.threads(user.user())} == {".."}
    for i, thread in enumerate(ODD_IDS):
        assert texts(store, user.thread(thread)) == [f"第{i}条"]
        assert store.state.get(user.thread(thread)) == {"i": i}
        assert store.checkpoints.latest(user.thread(thread)).data == {"i": i}
    job = store.jobs.claim(worker="w")
    assert (job.scope.tenant, job.scope.user_id, job.scope.agent_id) == ("../租户", "a/../b", "..")
    assert job.scope.thread_id in ODD_IDS
    assert [p.name for p in tmp_path.iterdir()] == ["root"]
    paths = [p.relative_to(root).as_posix() for p in root.rglob("*")]
    assert len({p.lower() for p in paths}) == len(paths)  # no two differ only by case


def test_too_long_an_id_is_refused_before_anything_is_written(tmp_path):
    store = JsonlStore(tmp_path)
    with pytest.raises(InvalidInput, match="too long"):
        store.history.append(Scope(user_id="u", thread_id="长" * 100), [msg("user", "x")], enqueue=["probe"])
    assert not (tmp_path / "default").exists()


def test_files_are_readable_json_lines(tmp_path):
    store = JsonlStore(tmp_path)
    stored = store.history.append(A, [msg("user", "我叫李四\u2028第二行"), msg("assistant", "你好李四！", 1)])
    text = (tmp_path / "default" / "user_001" / "_" / "threads" / "t1.jsonl").read_text("utf-8")
    assert "我叫李四" in text and "\\u" not in text
    lines = text.split("\n")  # not splitlines(): U+2028 stays inside its line
    assert lines[-1] == ""
    assert [json.loads(line) for line in lines[:-1]] == [{"seq": m.seq, **m.to_dict()} for m in stored]
    assert store.url == f"jsonl://{tmp_path.resolve().as_posix()}"


def test_torn_last_line_is_ignored_then_cut_by_the_next_append(tmp_path):
    store = JsonlStore(tmp_path)
    store.history.append(A, [msg("user", "我叫李四"), msg("assistant", "你好李四！", 1)])
    path = store.thread_path(A)
    with path.open("ab") as file:  # a process killed mid-write, inside a multi-byte character
        file.write('{"seq": 99, "role": "user", "content": "半'.encode()[:-1])
    assert texts(store) == ["我叫李四", "你好李四！"]
    assert [(t.thread_id, t.messages) for t in store.history.threads(A.user())] == [("t1", 2)]
    store.history.append(A, [msg("user", "我叫什么？", 2)])
    reopened = JsonlStore(tmp_path)
    assert texts(reopened) == ["我叫李四", "你好李四！", "我叫什么？"]
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and [json.loads(line)["content"] for line in lines[:-1]] == texts(reopened)


def _append_from_process(root: str, worker: int, start) -> None:
    store = JsonlStore(root)
    start.wait()
    for i in range(50):
        store.history.append(A, [msg("user", f"p{worker}-{i}")], enqueue=["probe"])
        time.sleep(0.001)  # a chat app pauses between messages, which lets the other writers in
    store.close()


def test_four_processes_append_to_one_thread(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(4)
    procs = [ctx.Process(target=_append_from_process, args=(str(tmp_path), w, start)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    store = JsonlStore(Path(tmp_path))
    got = store.history.read(A)
    assert len(got) == 200 and len({m.id for m in got}) == 200
    assert [m.seq for m in got] == sorted(m.seq for m in got)  # file order is seq order
    for w in range(4):
        assert [m.text for m in got if m.text.startswith(f"p{w}-")] == [f"p{w}-{i}" for i in range(50)]
    writers = [m.text.split("-")[0] for m in got]
    assert sum(a != b for a, b in itertools.pairwise(writers)) > 3  # the writers really interleaved
    job = store.jobs.claim(worker="w")
    assert job.version == 200


def test_a_corrupt_complete_line_is_an_error_not_skipped(tmp_path):
    store = JsonlStore(tmp_path)
    store.history.append(A, [msg("user", "我叫李四")])
    with store.thread_path(A).open("ab") as file:
        file.write(b"not json\n")
    with pytest.raises(SchemaError, match="t1.jsonl:2"):
        store.history.read(A)
