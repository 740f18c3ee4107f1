"""The cost ceiling per tenant (memstack.ceiling): the layers' jobs wait with the reason once the
budget is spent and run in the next period, on every backend; two workers on PostgreSQL cannot
overspend it together; the proxy's answer budget is a 429 with Retry-After, and the layers'
budget never blocks an answer. The clock is injected, never slept on."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from memstack import InvalidInput, Memory
from memstack.backends import open_store
from memstack.ceiling import Ceiling, Hold, Wait
from memstack.costs import Budget, Limit, period_window
from memstack.llm.base import Completion
from memstack.profile import Profile
from memstack.testing import ScriptedModel
from memstack.types import Job, Scope

#: each scripted call costs exactly this many tokens (prompt + completion)
COST = 1000
EXTRACTION = json.dumps(
    {"memories": [{"subject": "知识中台", "subject_type": "项目", "predicate": "后端使用", "object": "SpringBoot"}]}, ensure_ascii=False
)


class Clock:
    """A clock the test moves: starts at the real now (the usage log stamps real time)."""

    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def next_month(self) -> None:
        self.now = period_window("month", self.now)[1] + timedelta(hours=1)


def answer(messages, schema) -> Completion:
    return Completion(EXTRACTION, "scripted", COST - 100, 100, 0.1)


def postgres(schema: str):
    from memstack.backends.postgres import PostgresStore

    return lambda: PostgresStore(os.environ["MEMSTACK_TEST_PG_DSN"], schema=schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request, tmp_path):
    """A function opening the store under test (each call: another connection, as another process's)."""
    if request.param == "memory":
        yield lambda: open_store("memory://")
    elif request.param == "sqlite":
        yield lambda: open_store(f"sqlite:///{tmp_path}/m.db")
    else:
        from pgsupport import drop_schema, require_dsn

        dsn = require_dsn("ceiling")
        name = f"memstack_test_ceiling_{os.urandom(6).hex()}"
        yield postgres(name)
        drop_schema(dsn, name)


def budgeted(url, clock: Clock, *limits: str, model=None, **kw) -> Memory:
    store = url()
    Memory.configure(store, layers="summary", options={"model": "local"}, budget=Budget.parse(limits))
    ceiling = Ceiling(store, clock=clock, recheck=0.0, allowance=COST)  # recheck 0: a waiting job may be claimed at once
    return Memory(store, options={"model": model or ScriptedModel(default=answer), "batch_messages": 2}, ceiling=ceiling, **kw)


def talk(mem: Memory, user: str, thread: str, text: str = "我正在开发一个知识中台") -> None:
    mem.add([{"role": "user", "content": text}, {"role": "assistant", "content": "好的，后端用什么？"}], user_id=user, thread_id=thread)


def spent(mem: Memory, tenant: str = "default") -> int:
    return sum(t.tokens for t in mem.store.usage.totals(tenant))  # type: ignore[attr-defined]


# ---- the values ------------------------------------------------------------------------------------


def test_budgets_parse_describe_and_round_trip_through_the_profile():
    budget = Budget.parse(["tokens=2000000/day,tokens=50_000/day/user"], "tokens=1,000/hour")
    assert budget.describe() == "layers 2,000,000 tokens/day, 50,000 tokens/day/user; answers 1,000 tokens/hour/user"
    assert budget.tenant() == Limit(2_000_000, "day") and budget.user() == Limit(50_000, "day", per_user=True)
    profile = Profile(("summary",), budget=budget)
    data = json.loads(json.dumps(profile.to_dict()))
    assert data["version"] == 3 and Profile.from_dict(data) == profile
    old = {"version": 1, "layers": ["window"], "preset": None, "options": {}, "counter": None}
    assert Profile.from_dict(old).budget.unlimited and Profile(("window",)).to_dict() == old  # an old profile reads as unlimited


def test_a_malformed_budget_in_a_profile_is_a_clear_error():
    from memstack.errors import UsageError

    for bad in ({"layers": "tokens=5/day"}, {"layers": [{"tokens": -1, "period": "day"}]}, {"answers": {"tokens": 5, "period": "week"}}):
        with pytest.raises(UsageError, match="malformed"):
            Profile.from_dict({"version": 3, "layers": ["window"], "budget": bad})


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("tokenz=5/day", "'tokens'"),
        ("tokens=abc/day", "'abc'"),
        ("tokens=0/day", "'0'"),
        ("tokens=5/week", "'week'"),
        ("tokens=5/day/team", "'team'"),
        ("tokens=5", "tokens=N/PERIOD"),
    ],
)
def test_bad_budgets_are_refused_naming_the_bad_part(text, part):
    with pytest.raises(InvalidInput, match=part) as caught:
        Budget.parse([text])
    assert caught.value.field == "--budget"


def test_periods_are_utc_hours_days_and_months():
    at = datetime(2026, 12, 5, 10, 30, tzinfo=timezone(timedelta(hours=8)))  # 02:30 UTC
    assert period_window("hour", at) == (datetime(2026, 12, 5, 2, tzinfo=timezone.utc), datetime(2026, 12, 5, 3, tzinfo=timezone.utc))
    assert period_window("day", at)[1] == datetime(2026, 12, 6, tzinfo=timezone.utc)
    assert period_window("month", at) == (datetime(2026, 12, 1, tzinfo=timezone.utc), datetime(2027, 1, 1, tzinfo=timezone.utc))


# ---- the layers' jobs wait, then run in the next period -----------------------------------------


def test_jobs_wait_with_the_reason_once_the_budget_is_spent_then_run_next_period(url):
    clock = Clock()
    mem = budgeted(url, clock, "tokens=2500/month")
    try:
        for thread in ("t1", "t2", "t3"):
            talk(mem, "张三", thread)
        report = mem.run_jobs()
        assert (report.ran, report.waited) == (2, 2)  # the third job came back at once (recheck 0), once
        assert spent(mem) == 2 * COST <= 2500  # a third call would pass the ceiling: it does not run
        assert mem.pending() == 1  # it waits in the queue, pending
        (reason,) = mem.ceiling.waiting("default")
        end = period_window("month", clock.now)[1].strftime("%Y-%m-%dT%H:%MZ")
        assert reason.startswith(f"waiting: tenant budget 2,500 tokens/month reached, resumes {end}")
        assert mem.ceiling.waiting("default", "张三") == [reason]
        (limit,) = mem.ceiling.spends("default")
        assert (limit.spent, limit.held, limit.limit.tokens) == (2 * COST, 0, 2500)
        assert mem.run_jobs().ran == 0 and spent(mem) == 2 * COST  # still this period: still waiting
        clock.next_month()
        assert mem.run_jobs().ran == 1 and mem.pending() == 0  # the next period: it runs
        assert mem.ceiling.waiting("default") == []
    finally:
        mem.close()


def test_a_per_user_budget_stops_one_user_and_not_another(url):
    clock = Clock()
    mem = budgeted(url, clock, "tokens=1500/month/user")
    try:
        talk(mem, "张三", "t1")
        talk(mem, "李四", "t1")
        talk(mem, "张三", "t2")  # queued last: with recheck 0 the run that puts it off stops when it comes back
        mem.run_jobs()
        by_user = {t.user_id: t.tokens for t in mem.store.usage.totals("default")}  # type: ignore[attr-defined]
        assert by_user == {"张三": COST, "李四": COST}
        assert mem.pending(user_id="张三") == 1 and mem.pending(user_id="李四") == 0
        (reason,) = mem.ceiling.waiting("default", "张三")
        assert reason.startswith("waiting: user '张三' budget 1,500 tokens/month reached")
        assert mem.ceiling.waiting("default", "李四") == []
    finally:
        mem.close()


def test_tenants_budgets_are_their_own(url):
    clock = Clock()
    mem = budgeted(url, clock, "tokens=1500/month")
    try:
        Memory.configure(mem.store, layers="summary", options={"model": "local"}, tenant="acme")  # no budget
        acme = Memory(mem.store, tenant="acme", options={"model": ScriptedModel(default=answer), "batch_messages": 2})
        for t in ("t1", "t2"):
            talk(acme, "u", t)
        for t in ("t1", "t2"):
            talk(mem, "u", t)
        mem.run_jobs()
        assert spent(mem) == COST and spent(mem, "acme") == 2 * COST  # acme is unlimited, default stops at one
    finally:
        mem.close()


def test_a_budget_set_with_init_changes_only_the_budget(url):
    store = url()
    try:
        Memory.configure(store, layers="summary", options={"model": "local"})
        profile, queued = Memory.configure(store, budget=Budget.parse(["tokens=100/day"]))
        assert profile.layers == ("summary",) and profile.budget.describe() == "layers 100 tokens/day" and queued == 0
        profile, _ = Memory.configure(store, layers="summary", options={"model": "local"})
        assert profile.budget.describe() == "layers 100 tokens/day"  # kept until another is given
    finally:
        store.close()


def test_the_ledger_alone_holds_the_ceiling_on_every_backend_jsonl_included(tmp_path, url):
    """Reservations through the StateStore's compare-and-set: what running jobs hold counts, a
    release frees it; on jsonl too (no usage log: nothing spent, holds alone)."""
    for opener in (url, lambda: open_store(f"jsonl://{tmp_path}/j")):
        store = opener()
        try:
            Memory.configure(store, budget=Budget.parse(["tokens=3000/day"]))
            clock = Clock()
            ceiling = Ceiling(store, clock=clock)
            jobs = [Job(Scope(user_id="u", thread_id=f"t{i}"), "extract:facts", 1, 0, 0, "w") for i in range(3)]
            first, second = ceiling.reserve(jobs[0], 1400), ceiling.reserve(jobs[1], 1400)
            assert isinstance(first, Hold) and isinstance(second, Hold)
            third = ceiling.reserve(jobs[2], 1400)
            assert isinstance(third, Wait) and "2,800 running" in third.reason
            ceiling.release(first)
            assert isinstance(ceiling.reserve(jobs[2], 1400), Hold)
            clock.now += timedelta(hours=2)  # a killed worker's holds lapse after hold_seconds
            assert ceiling.spends("default")[0].held == 0
        finally:
            store.close()


# ---- two workers on PostgreSQL ---------------------------------------------------------------------


@pytest.fixture
def pg_schema():
    from pgsupport import drop_schema, require_dsn

    dsn = require_dsn("ceiling")
    name = f"memstack_test_ceiling_{os.urandom(6).hex()}"
    yield name
    drop_schema(dsn, name)


@pytest.mark.postgres
def test_two_workers_on_postgresql_cannot_overspend_together(pg_schema):
    url = postgres(pg_schema)
    clock = Clock()
    calls = []

    def slow(messages, schema_):
        calls.append(1)
        time.sleep(0.05)  # both workers are mid-call at once
        return answer(messages, schema_)

    workers = [budgeted(url, clock, "tokens=3500/month", model=ScriptedModel(default=slow)) for _ in range(2)]  # two stores: two processes
    try:
        for i in range(10):
            talk(workers[0], f"user_{i % 3}", f"t{i}")
        reports = []
        threads = [threading.Thread(target=lambda m=m: reports.append(m.run_jobs(worker=f"w{id(m)}"))) for m in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # each job reserves 1,000 + its messages: with a third running, a fourth does not fit (counting only
        # what was spent, 2,000 + 1,020 <= 3,500, both workers would start one more: 4,000)
        assert spent(workers[0]) == 3 * COST <= 3500
        assert len(calls) == 3 and sum(r.ran for r in reports) == 3 and workers[0].pending() == 7
        assert all(r.failed == 0 for r in reports)
    finally:
        for m in workers:
            m.close()


# ---- the proxy ----------------------------------------------------------------------------------------


def test_the_proxys_answer_budget_is_a_429_with_retry_after_and_the_layers_budget_never_blocks_an_answer(tmp_path):
    openai = pytest.importorskip("openai")
    pytest.importorskip("fastapi")
    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer
    from memstack.types import UsageRecord

    store = open_store(f"sqlite:///{tmp_path}/p.db")
    Memory.configure(store, layers="summary", options={"model": "local"}, budget=Budget.parse(["tokens=10/day"], "tokens=300/day"))
    store.usage.record([UsageRecord(Scope(user_id="张三", thread_id="x"), "extract", "m", 100, 20, 1.0)])  # the layers' budget is spent
    mem = Memory(store, options={"model": ScriptedModel(default=answer)})
    upstream = ScriptedModel(default=lambda messages, schema: Completion("好的，记住了。", "scripted", 150, 50, 0.1))  # 200 an answer
    app = create_app(mem, ServerConfig(model=upstream, worker=False))
    try:
        with BackgroundServer(app) as server:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="not-needed", max_retries=0)

            def ask(user: str, text: str = "我正在开发一个知识中台"):
                return client.chat.completions.create(model="m", user=user, messages=[{"role": "user", "content": text}])

            assert ask("张三").choices[0].message.content == "好的，记住了。"  # the layers' budget never blocks an answer
            ask("张三", "后端使用SpringBoot")  # 200 spent < 300: answered, now 400
            with pytest.raises(openai.RateLimitError) as caught:
                ask("张三", "缓存使用Redis")
            response = caught.value.response
            end = period_window("day", datetime.now(timezone.utc))[1]
            assert (
                response.status_code == 429
                and 0 < int(response.headers["retry-after"]) <= (end - datetime.now(timezone.utc)).total_seconds() + 2
            )
            error = response.json()["error"]
            assert error["code"] == "answer_budget_exceeded" and error["type"] == "insufficient_quota"
            assert (
                "'张三'" in error["message"]
                and "300 tokens/day" in error["message"]
                and end.strftime("%Y-%m-%dT%H:%MZ") in error["message"]
            )
            assert ask("李四").choices[0].message.content == "好的，记住了。"  # per user: another user still answers
            stream = client.chat.completions.create(model="m", user="王五", messages=[{"role": "user", "content": "你好"}], stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "好的，记住了。"
            texts = [m.text for m in mem.history(user_id="张三", thread_id=datetime.now(timezone.utc).date().isoformat())]
            assert "缓存使用Redis" not in texts  # the refused request stored nothing
        answers = {t.user_id: t.tokens for t in store.usage.totals("default") if t.layer == "answer"}
        assert answers.pop("王五") > 0  # a streamed answer is metered too (counted here)
        assert answers == {"张三": 400, "李四": 200}  # metered as layer "answer", apart from the layers' spend
    finally:
        mem.close()


def test_usage_per_tenant_and_user_in_the_cli_json_and_rest(tmp_path, capsys):
    pytest.importorskip("fastapi")
    import httpx

    from memstack.cli import main
    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer
    from memstack.types import UsageRecord

    db = f"sqlite:///{tmp_path}/u.db"
    assert main(["--db", db, "init", "--strategy", "summary", "--model", "local", "--budget", "tokens=5000/day,tokens=2000/day/user"]) in (
        0,
        None,
    )
    store = open_store(db)
    store.usage.record(
        [
            UsageRecord(Scope(user_id="张三", thread_id="t"), "extract", "m", 1500, 500, 1.0),
            UsageRecord(Scope(user_id="李四", thread_id="t"), "answer", "m", 90, 10, 1.0),
        ]
    )
    capsys.readouterr()
    main(["--db", db, "usage", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert [(u["user_id"], u["layer_tokens"], u["answer_tokens"]) for u in data["users"]] == [("张三", 2000, 0), ("李四", 0, 100)]
    assert [(x["user_id"], x["spent"], x["reached"]) for x in data["limits"]] == [(None, 2000, False), ("张三", 2000, True)]
    main(["--db", db, "usage"])
    table = capsys.readouterr().out
    assert "budget layers 5,000 tokens/day, 2,000 tokens/day/user" in table and "张三" in table and "2,000" in table
    main(["--db", db, "usage", "--user", "李四", "--since", "2000-01-01", "--json"])
    assert [u["user_id"] for u in json.loads(capsys.readouterr().out)["users"]] == ["李四"]
    job = Job(Scope(user_id="张三", thread_id="t"), "extract:facts", 1, 0, 0, "w")
    assert isinstance(Ceiling(store).reserve(job, 100), Wait)  # 张三 has spent 2,000 of 2,000 today: a job of theirs waits
    main(["--db", db, "config"])
    assert "waiting: user '张三' budget 2,000 tokens/day reached, resumes" in capsys.readouterr().out
    mem = Memory(store)
    try:
        with BackgroundServer(create_app(mem, ServerConfig(worker=False))) as server:
            rest = httpx.get(server.url + "/v1/usage").json()
            assert rest["users"] == data["users"] and rest["budget"] == data["budget"]
            assert httpx.get(server.url + "/v1/usage", params={"user_id": "张三"}).json()["limits"][1]["reached"] is True
            page = httpx.get(server.url + "/ui", follow_redirects=True).text  # the dashboard's users page: spend vs budget
            assert "2,000 spent, 0 running, of 2,000 tokens/day" in page and "张三" in page and "2,000 spent, 0 running, of 5,000" in page
            bad = httpx.get(server.url + "/v1/usage", params={"since": "yesterday"})
            assert bad.status_code == 422 and bad.json()["error"]["field"] == "since"
            far = httpx.get(server.url + "/v1/usage", params={"since": "0001-01-01T00:00:00+01:00"})  # year 0 in UTC
            assert far.status_code == 422 and far.json()["error"]["field"] == "since"
    finally:
        mem.close()
