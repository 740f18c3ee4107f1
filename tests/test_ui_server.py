"""The dashboard over HTTP, without a browser: login by key, tenant scoping, CSRF, the loopback rule
without keys, escaping, the language by Accept-Language, and every action audited (a real
uvicorn server and httpx; tests/test_ui_browser.py drives the same pages in Chromium)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("jinja2")

from ui_seed import ACME_ONLY, GLOBEX_SECRET, KEYS, NOTES_ONLY, SAVED, STATE_ONLY, USER, XSS_IMG, XSS_SCRIPT, seed  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.saved import NOTES_THREAD, note_id  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.server.run import BackgroundServer  # noqa: E402
from memstack.server.ui.i18n import language  # noqa: E402
from memstack.testing import ScriptedModel  # noqa: E402
from memstack.types import Change, Unit, utcnow  # noqa: E402


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    memory = Memory(str(tmp_path_factory.mktemp("ui") / "ui.db"), layers="window,entities,graph,state", tenant="acme")
    seed(memory)
    app = create_app(memory, ServerConfig(model=ScriptedModel(), api_keys=KEYS, worker=False))
    with BackgroundServer(app) as server:
        yield SimpleNamespace(memory=memory, url=server.url)
    memory.close()


@contextmanager
def browser(service, key: str | None = "key-acme", lang: str = "en") -> Iterator[httpx.Client]:
    """A client that keeps cookies, logged in with ``key``."""
    with httpx.Client(base_url=service.url, headers={"Accept-Language": lang}, timeout=30, follow_redirects=False) as c:
        if key is not None:
            token = csrf(c.get("/ui/login").text)
            r = c.post("/ui/login", data={"key": key, "csrf": token})
            assert r.status_code == 303, r.text
        yield c


def csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def test_pages_need_a_login_and_a_known_key(service):
    with browser(service, key=None) as c:
        r = c.get(f"/ui/user?u={USER}")
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"
        token = csrf(c.get("/ui/login").text)
        assert c.post("/ui/login", data={"key": "wrong", "csrf": token}).status_code == 401
        assert c.post("/ui/login", data={"key": "key-acme"}).status_code == 403  # no CSRF token
    with browser(service) as c:
        page = c.get("/ui")
        assert page.status_code == 200 and USER in page.text and ACME_ONLY in page.text
        assert "key-acme" not in str(c.cookies.jar.__dict__) and all("key-acme" not in v for v in c.cookies.values())
        assert "script-src 'self'" in page.headers["content-security-policy"]


def test_a_session_ends_a_working_day_after_its_login(service, monkeypatch):
    from memstack.server.ui import session

    with browser(service) as c:
        assert c.get(f"/ui/user?u={USER}").status_code == 200
        cookie = c.cookies["memstack_ui"]
        issued = int(cookie.split(".")[0])
        monkeypatch.setattr(session, "now", lambda: issued + session.SESSION_SECONDS - 1)
        assert c.get(f"/ui/user?u={USER}").status_code == 200
        monkeypatch.setattr(session, "now", lambda: issued + session.SESSION_SECONDS + 1)
        r = c.get(f"/ui/user?u={USER}")
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    monkeypatch.undo()
    # a cookie dated later than the login, with the signature of the real login, is refused too,
    # as is the previous release's undated token
    with browser(service, key=None) as c:
        stamp, sig = cookie.split(".")
        for forged in (f"{int(stamp) + 3600}.{sig}", sig, "", "x.y", f"{'9' * 40}.{sig}"):
            c.cookies.set("memstack_ui", forged, path="/ui")
            r = c.get(f"/ui/user?u={USER}")
            assert r.status_code == 303 and r.headers["location"] == "/ui/login", forged


def test_a_key_sees_only_its_tenant(service):
    with browser(service, "key-globex") as c:
        users = c.get("/ui").text
        assert USER in users and ACME_ONLY not in users
        assert GLOBEX_SECRET in c.get(f"/ui/user?u={USER}").text
        assert c.get(f"/ui/user?u={ACME_ONLY}").status_code == 404
        assert c.get(f"/ui/graph?u={ACME_ONLY}").status_code == 404
        token = csrf(c.get("/ui").text)
        r = c.post("/ui/do/user-forget", data={"csrf": token, "u": ACME_ONLY, "confirm": ACME_ONLY})
        assert r.status_code == 404
        r = c.post("/ui/do/state-set", data={"csrf": token, "u": USER, "key": "城市", "value": "北京", "as": "text"})
        assert r.status_code == 303  # globex's own li_si: a new key there, nothing of acme's
    acme = service.memory.scope(USER, tenant="acme")
    assert service.memory.store.records.current(acme, "state", ["城市"])[0].value == {"value": "深圳"}
    assert service.memory.threads(user_id=ACME_ONLY, tenant="acme")


def test_every_form_needs_the_csrf_token_of_its_cookie(service):
    with browser(service) as c:
        token = csrf(c.get(f"/ui/user?u={USER}").text)
        form = {"u": USER, "key": "城市", "value": "广州", "as": "text"}
        assert c.post("/ui/do/state-set", data=form).status_code == 403
        assert c.post("/ui/do/state-set", data={**form, "csrf": "x" * 43}).status_code == 403
        assert c.post("/ui/do/state-set", data={**form, "csrf": token}, headers={"Origin": "https://evil.example"}).status_code == 403
        with browser(service) as other:  # another session's token is not this one's
            assert other.post("/ui/do/state-set", data={**form, "csrf": token}).status_code == 403
    acme = service.memory.scope(USER, tenant="acme")
    assert service.memory.store.records.current(acme, "state", ["城市"])[0].value == {"value": "深圳"}


def test_what_users_and_models_wrote_is_escaped(service):
    with browser(service) as c:
        for path in (
            f"/ui/user?u={USER}",
            f"/ui/thread?u={USER}&t=s1",
            f"/ui/graph?u={USER}",
            f"/ui/entity?u={USER}&k=xss",
            f"/ui/audit?u={USER}",
        ):
            html = c.get(path).text
            assert "<script>window" not in html and "<img src=x" not in html, path
            assert "&lt;script&gt;" in html or "\\u003cscript\\u003e" in html, path
        html = c.get(f"/ui/thread?u={USER}&t=s1").text
        assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in html
        assert "&#34;&gt;&lt;img src=x onerror=&#34;window.__xss = 1&#34;&gt;" in html
        assert XSS_SCRIPT not in html and XSS_IMG not in html


def test_the_language_follows_accept_language(service):
    assert language("zh-CN,zh;q=0.9,en;q=0.8") == "zh"
    assert language("en-US,en;q=0.9,zh-CN;q=0.8") == "en"
    assert language("fr-FR, zh-TW;q=0.5") == "zh"
    assert language("de") == "en" and language(None) == "en"
    with browser(service, lang="zh-CN,zh;q=0.9") as c:
        assert "知识图谱" in c.get(f"/ui/user?u={USER}").text
    with browser(service, lang="en-GB") as c:
        assert "Audit log" in c.get(f"/ui/user?u={USER}").text


def test_bad_input_is_a_page_not_a_500(service):
    with browser(service) as c:
        assert c.get("/ui/user").status_code == 422
        assert c.get(f"/ui/audit?u={USER}&kind=nothing").status_code == 422
        assert c.get(f"/ui/audit?u={USER}&limit=abc").status_code == 422
        assert c.get(f"/ui/entity?u={USER}&k=nobody").status_code == 404
        assert c.get(f"/ui/thread?u={USER}&t=nope").status_code == 404
        r = c.get(f"/ui/context?u={USER}&t=s1&max_tokens=-4&build=1")  # the form says what is wrong
        assert r.status_code == 200 and "max_tokens must be from 0" in r.text
        r = c.get(f"/ui/context?u={USER}&t=s1&strategy=nolayer&build=1")
        assert r.status_code == 200 and "nolayer" in r.text and 'role="alert"' in r.text
        token = csrf(c.get("/ui").text)
        assert (
            c.post("/ui/do/note-edit", data={"csrf": token, "u": USER, "t": "s1", "i": "x", "text": "a", "expect": "b"}).status_code == 422
        )
        assert c.post("/ui/do/no-such-action", data={"csrf": token}).status_code == 404
        assert c.get("/ui/static/../app.py").status_code == 404


def test_a_forget_needs_the_typed_confirmation(service):
    memory = service.memory
    memory.add({"role": "user", "content": "临时会话"}, user_id="tmp_user", thread_id="x1", tenant="acme")
    with browser(service) as c:
        token = csrf(c.get("/ui").text)
        r = c.post("/ui/do/user-forget", data={"csrf": token, "u": "tmp_user", "confirm": "tmp"})
        assert r.status_code == 422 and memory.threads(user_id="tmp_user", tenant="acme")
        r = c.post("/ui/do/user-forget", data={"csrf": token, "u": "tmp_user", "confirm": "tmp_user"})
        assert r.status_code == 303 and not memory.threads(user_id="tmp_user", tenant="acme")


def test_users_without_messages_are_listed_with_their_saved_memories(service):
    with browser(service) as c:
        users = c.get("/ui").text
        assert NOTES_ONLY in users and STATE_ONLY in users
        page = c.get(f"/ui/user?u={NOTES_ONLY}")
        assert page.status_code == 200 and "我养了一只猫" in page.text
        page = c.get(f"/ui/user?u={USER}").text
        saved = page[page.index('id="saved"') : page.index('id="forget"')]
        assert all(text.replace("<", "&lt;").replace(">", "&gt;") in saved for text in SAVED) and "<script>window" not in saved
        assert "饮食" in saved and ">key/value<" in saved


def test_a_saved_memory_is_deleted_and_the_deletion_noted(service):
    memory = service.memory
    memory.store.units.put(
        [
            Unit(
                id=note_id("临时笔记"),
                scope=memory.scope("sun_shi", NOTES_THREAD, tenant="acme"),
                text="临时笔记：密码是1234",
                timestamp=utcnow(),
                kind="note",
            )
        ]
    )
    with browser(service) as c:
        token = csrf(c.get("/ui/user?u=sun_shi").text)
        r = c.post("/ui/do/saved-delete", data={"csrf": token, "u": "sun_shi", "id": note_id("临时笔记")})
        assert r.status_code == 303 and r.headers["location"] == "/ui?done=forgot_saved"  # that was all of the user
        assert c.get("/ui/user?u=sun_shi").status_code == 404
        r = c.post("/ui/do/saved-delete", data={"csrf": token, "u": USER, "id": "note-nothing"})
        assert r.status_code == 422 and "no saved memory" in r.text
        log = c.get("/ui/forgotten").text
        assert "a saved memory" in log and "密码" not in log and "sun_shi" not in log
    (note,) = [d for d in memory.store.deletions("acme", user_id="sun_shi")]
    assert (note.kind, note.layer, note.counts) == ("note", "ui", {"units": 1})


def test_forgetting_is_in_the_audit_timeline_and_the_deletion_log(service):
    memory = service.memory
    memory.add(
        [{"role": "user", "content": "第一个会话：我的身份证号是110101"}, {"role": "assistant", "content": "好的"}],
        user_id="zheng_shi",
        thread_id="z1",
        tenant="acme",
    )
    memory.add({"role": "user", "content": "第二个会话"}, user_id="zheng_shi", thread_id="z2", tenant="acme")
    memory.store.records.apply(
        memory.scope("zheng_shi", "z1", tenant="acme"),
        [Change("put", "summary", "summary", {"items": [{"text": "身份证号110101"}]}, (), utcnow())],
        layer="summary",
    )
    with browser(service) as c:
        token = csrf(c.get("/ui").text)
        r = c.post("/ui/do/thread-forget", data={"csrf": token, "u": "zheng_shi", "t": "z1", "confirm": "z1"})
        assert r.status_code == 303
        audit = c.get("/ui/audit?u=zheng_shi").text
        assert 'class="event forget"' in audit and "a thread" in audit and "messages 2" in audit and "memories 1" in audit
        assert '<span class="layer">ui</span>' in audit and "110101" not in audit and ">z1<" not in audit
        only = c.get("/ui/audit?u=zheng_shi&kind=forgotten").text
        assert only.count('class="event forget"') == 1 and 'class="event add"' not in only
        assert 'class="event forget"' not in c.get("/ui/audit?u=zheng_shi&kind=summary").text
        r = c.post("/ui/do/user-forget", data={"csrf": token, "u": "zheng_shi", "confirm": "zheng_shi"})
        assert r.status_code == 303
        log = c.get("/ui/forgotten").text
        assert log.count('class="event forget"') >= 2 and "the user" in log and "zheng_shi" not in log and "110101" not in log
    with browser(service, "key-globex") as c:
        assert "Nothing was forgotten yet." in c.get("/ui/forgotten").text  # another tenant's deletions are not this one's
    notes = memory.store.deletions("acme", user_id="zheng_shi")
    assert [(d.kind, d.layer) for d in notes] == [("thread", "ui"), ("user", "ui")]


def test_without_keys_only_loopback_names_are_answered(tmp_path):
    memory = Memory("memory://", layers="window")
    memory.add({"role": "user", "content": "你好"}, user_id="u1", thread_id="t1")
    app = create_app(memory, ServerConfig(model=ScriptedModel(), worker=False))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as c:
        assert c.get("/ui").status_code == 200 and "u1" in c.get("/ui").text
        assert c.get("/ui/login", follow_redirects=False).status_code == 303  # nothing to log in to
        port = server.url.rsplit(":", 1)[1]
        assert c.get("/ui", headers={"Host": f"localhost:{port}"}).status_code == 200
        r = c.get("/ui", headers={"Host": f"rebound.example:{port}"})  # a DNS name rebound to 127.0.0.1
        assert r.status_code == 403 and "u1" not in r.text
