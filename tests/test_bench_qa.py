"""`memstack bench qa`: judging, baselines, the run with a model in the loop, the CLI, and progress."""

import io
import json
import os
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from openai_stub import CannedOpenAI

from memstack.errors import InvalidInput
from memstack.evaluation.datasets import load
from memstack.evaluation.progress import Progress
from memstack.evaluation.qa import baseline_messages, judge_answer, keywords_match, run, systems_for, token_f1
from memstack.testing.models import ScriptedModel

#: a small MemoryBank-CN-format file of our own: two users, dated sessions, questions with keywords
FIXTURE = {
    "histories": {
        "王芳": {
            "2026-03-02": [
                {"query": "你好，我叫王芳，在成都当小学数学老师。", "response": "你好王芳！当老师很辛苦吧。"},
                {"query": "我养了一只橘猫，叫麻薯。", "response": "麻薯这个名字真可爱！"},
            ],
            "2026-03-09": [
                {"query": "周末去青城山爬山了，风景很好。", "response": "青城山很美，注意休息。"},
                {"query": "我下个月要去杭州参加培训。", "response": "祝培训顺利！"},
            ],
        },
        "李雷": {
            "2026-03-03": [
                {"query": "我在深圳做程序员，最近在学Rust。", "response": "Rust很适合系统编程。"},
            ],
        },
    },
    "questions": [
        {
            "user": "王芳",
            "question": "我的猫叫什么名字？",
            "evidence": ["2026-03-02#1"],
            "answer": "麻薯",
            "answer_keywords": ["麻薯"],
            "type": "single-hop",
        },
        {
            "user": "王芳",
            "question": "我在哪个城市工作？",
            "evidence": ["2026-03-02#0"],
            "answer": "成都",
            "answer_keywords": ["成都"],
            "type": "first-person",
        },
        {
            "user": "王芳",
            "question": "我周末去哪里爬山了？",
            "evidence": ["2026-03-09#0"],
            "answer": "青城山",
            "answer_keywords": ["青城山"],
            "type": "single-hop",
        },
        {
            "user": "李雷",
            "question": "我最近在学什么编程语言？",
            "evidence": ["2026-03-03#0"],
            "answer": "Rust",
            "answer_keywords": ["rust"],
            "type": "single-hop",
        },
    ],
}
GOLD = {"我的猫叫什么名字？": "麻薯", "我在哪个城市工作？": "成都", "我周末去哪里爬山了？": "青城山", "我最近在学什么编程语言？": "Rust"}


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "qa.json"
    path.write_text(json.dumps(FIXTURE, ensure_ascii=False), encoding="utf-8")
    return path


def reader(messages, schema=None):
    """A model that answers only from what it is shown: the gold answer when the memory it was
    given (the system messages after the instruction) contains it, else 'I don't know'."""
    question = messages[-1]["content"]
    memory = "\n".join(m["content"] for m in messages[1:-1] if m["role"] == "system")
    gold = GOLD.get(question, "")
    return f"答案是{gold}。" if gold and gold in memory else "我不知道。"


# ---- judging -------------------------------------------------------------------------------------


def test_keywords_need_one_alternative_of_every_entry_ignoring_case_space_and_width():
    assert keywords_match("搬家定在 7月11日，周六", ["7月11日|7月11号|07-11"])
    assert keywords_match("ＲＵＳＴ语言", ["rust"])  # full width and case
    assert keywords_match("宁波，6 月底", ["宁波", "6月底|六月底"])  # spaces ignored
    assert not keywords_match("宁波", ["宁波", "6月底|六月底"])  # every entry is needed
    assert not keywords_match("anything", [])


def test_a_number_matches_only_as_a_whole_number():
    # a real answer the substring test judged right: the gold was 7 km more, the answer 17
    assert not keywords_match("我现在每周的跑量增加了17公里。", ["7公里|七公里"])
    assert not keywords_match("定在3月11日", ["3月1日"])
    assert keywords_match("增加了7公里，到42公里", ["7公里|七公里"])
    assert keywords_match("17公里，其中7公里是轻松跑", ["7公里"])  # a later whole occurrence counts
    assert keywords_match("第2.5版", ["2.5版"])
    assert not judge_answer(_question("7公里", "多跑了几公里？"), "多跑了17公里")["correct"]


def test_a_latin_word_matches_only_as_a_whole_word():
    assert keywords_match("订单服务现在用Go重写了", ["go|golang"]) and keywords_match("It is written in Go.", ["go|golang"])
    assert not keywords_match("It is going well with MongoDB", ["go|golang"])
    assert keywords_match("文档检索用的是ES", ["elasticsearch|es"]) and not keywords_match("it uses Solr", ["elasticsearch|es"])
    assert keywords_match("跑了7 km", ["7km"])  # whitespace in the answer still does not count
    assert keywords_match("React Native and Supabase", ["react native", "supabase"])


def test_an_english_keyword_matches_in_its_own_tense():
    assert keywords_match("I like swimming.", ["游泳|swim"]) and keywords_match("She quit smoking", ["quits|quit"])
    assert keywords_match("It hurt my back, backs ache", ["back"]) and keywords_match("He used Vue", ["use"])
    assert keywords_match("I moved out", ["move"]) and keywords_match("the herbs", ["herb"])
    assert not keywords_match("I swam", ["swim"])  # an irregular form is not the word
    assert not keywords_match("a swimsuit", ["swim"]) and not keywords_match("backend", ["back"])
    assert not keywords_match("swimmers", ["swim"]) and not keywords_match("backed up", ["bac"])


def test_token_f1_counts_chinese_characters_and_english_words():
    assert token_f1("The answer is Paris", "Paris") == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))  # 'the' dropped
    assert token_f1("青城山", "青城山") == 1.0
    assert token_f1("峨眉山", "青城山") == pytest.approx(1 / 3)
    assert token_f1("", "x") == 0.0


def test_judge_prefers_keywords_then_containment_then_f1():
    load_q = load("memorybank-cn", _write(FIXTURE))[0].questions[0]
    assert judge_answer(load_q, "它叫麻薯")["by"] == "keywords"
    assert judge_answer(load_q, "它叫麻薯")["correct"]
    short = _question(answer="Paris")
    assert judge_answer(short, "She moved to paris in May.") == {"correct": True, "by": "contains", "f1": pytest.approx(2 / 7, abs=0.001)}
    long = _question(answer="She went hiking in the mountains with her two brothers last spring")
    verdict = judge_answer(long, "she went hiking in the mountains with her brothers")
    assert verdict["by"] == "recall" and verdict["correct"]
    assert not judge_answer(long, "she stayed home")["correct"]


def test_explanatory_remarks_are_not_required_and_echoing_the_question_earns_nothing():
    remark = _question(answer="一个小时（在附近的公园慢跑）")
    assert judge_answer(remark, "我跑了大约一个小时。")["correct"]
    concert = _question(answer="周杰伦的演唱会；最喜欢《听妈妈的话》", text="我最近去看了谁的演唱会？我最喜欢他的什么歌？")
    guess = "我最近去看了周杰伦的演唱会。我最喜欢他的《青花瓷》。"  # the question's words again, one right name
    assert token_f1(guess, concert.answer) > 0.5 and not judge_answer(concert, guess)["correct"]
    assert judge_answer(concert, "你最近去看了周杰伦的演唱会，你最喜欢的是《听妈妈的话》，那首歌非常有感觉。")["correct"]
    tennis = _question(
        answer="Previously you played tennis with your friends at the local park every week", text="How often do I play tennis?"
    )
    refused = "I don't have any specific information about how often you play tennis with your friends at the local park."
    assert judge_answer(tennis, refused) == {
        "correct": False,
        "by": "refusal",
        "f1": pytest.approx(token_f1(refused, tennis.answer), abs=1e-4),
    }


def test_answer_keywords_are_loaded_and_checked(tmp_path):
    questions = [q for c in load("memorybank-cn", _write(FIXTURE)) for q in c.questions]
    assert [q.keywords for q in questions][0] == ("麻薯",)
    bad = {**FIXTURE, "questions": [{**FIXTURE["questions"][0], "answer_keywords": "麻薯"}]}
    with pytest.raises(InvalidInput, match="answer_keywords"):
        load("memorybank-cn", _write(bad))


# ---- baselines -----------------------------------------------------------------------------------


def test_baselines_show_nothing_the_evidence_or_the_newest_history_that_fits():
    conv = next(c for c in load("memorybank-cn", _write(FIXTURE)) if c.id == "王芳")
    q = conv.questions[0]
    count = len
    assert baseline_messages("none", conv, q, "zh", 10_000, count) == []
    oracle = baseline_messages("oracle", conv, q, "zh", 10_000, count)[0]["content"]
    assert "麻薯" in oracle and "青城山" not in oracle and "[2026-03-02 周一]" in oracle
    full = baseline_messages("full", conv, q, "zh", 10_000, count)[0]["content"]
    assert full.index("王芳") < full.index("青城山")  # time order
    cut = baseline_messages("full", conv, q, "zh", 60, count)[0]["content"]
    assert "杭州" in cut and "王芳" not in cut  # the newest turns are the ones kept


def test_systems_are_checked():
    assert [s.name for s in systems_for(["personal-assistant"], ["window,retrieval"], ["none", "oracle"])] == [
        "personal-assistant",
        "window,retrieval",
        "none",
        "oracle",
    ]
    with pytest.raises(InvalidInput, match="baseline"):
        systems_for(baselines=["everything"])
    with pytest.raises(InvalidInput):
        systems_for()


# ---- the run -------------------------------------------------------------------------------------


def test_run_ingests_asks_and_judges_each_system_on_the_same_questions(data, tmp_path):
    model = ScriptedModel(default=reader)
    systems = systems_for(strategies=["window,retrieval"], baselines=["none", "full", "oracle"])
    report = run("memorybank-cn", data, systems, model=model, reuse=tmp_path / "stores", max_tokens=1200)
    got = report["systems"]
    assert report["questions"] == 4
    assert got["none"]["accuracy"] == 0.0
    assert got["oracle"]["accuracy"] == 1.0 and got["full"]["accuracy"] == 1.0
    assert got["window,retrieval"]["accuracy"] == 1.0  # retrieval finds each answer in a new thread
    assert got["window,retrieval"]["of_oracle"] == 1.0
    assert set(got["oracle"]["by_type"]) == {"single-hop", "first-person"}
    assert got["window,retrieval"]["context_tokens"]["mean"] > 0 and got["none"]["context_tokens"]["mean"] == 0
    # every answering call starts with the one fixed instruction, dated at the question's time
    first = model.calls[0]["messages"][0]
    assert first["role"] == "system" and "今天是2026-03-09 周一" in first["content"]
    # no user's memory reaches another user's question
    rust = next(c for c in model.calls if c["messages"][-1]["content"] == "我最近在学什么编程语言？")
    assert "麻薯" not in json.dumps(rust["messages"], ensure_ascii=False)
    # a reused store is not ingested again
    again = run("memorybank-cn", data, systems_for(strategies=["window,retrieval"]), model=model, reuse=tmp_path / "stores")
    assert again["systems"]["window,retrieval"]["accuracy"] == 1.0
    from memstack import Memory

    with Memory(tmp_path / "stores" / "memorybank-cn-window-retrieval.db") as m:
        assert len(m.history(user_id="王芳", thread_id="2026-03-02")) == 4


def test_per_type_limit_and_only_select_questions(data):
    model = ScriptedModel(default="我不知道")
    report = run("memorybank-cn", data, systems_for(baselines=["none"]), model=model, per_type=1)
    assert sorted(r["type"] for r in report["systems"]["none"]["answers"]) == ["first-person", "single-hop"]
    report = run("memorybank-cn", data, systems_for(baselines=["none"]), model=model, only=["李雷"])
    assert [r["question"] for r in report["systems"]["none"]["answers"]] == ["我最近在学什么编程语言？"]
    with pytest.raises(InvalidInput):
        run("memorybank-cn", data, systems_for(baselines=["none"]), model=model, only=["nobody"])


def test_evidence_sessions_ingest_only_the_sessions_that_hold_evidence(data, tmp_path):
    from memstack import Memory

    model = ScriptedModel(default=reader)
    report = run(
        "memorybank-cn",
        data,
        systems_for(strategies=["window,retrieval"]),
        model=model,
        only=["王芳"],
        limit=1,
        sessions="evidence",
        reuse=tmp_path / "stores",
    )
    assert report["sessions"] == "evidence" and report["systems"]["window,retrieval"]["accuracy"] == 1.0
    with Memory(tmp_path / "stores" / "memorybank-cn-evidence-window-retrieval.db") as m:
        # the cat's question holds its evidence in 2026-03-02; the hike's day is not ingested
        assert [t.thread_id for t in m.threads(user_id="王芳")] == ["2026-03-02"]
    with pytest.raises(InvalidInput):
        run("memorybank-cn", data, systems_for(baselines=["none"]), model=model, sessions="some")


def test_a_failed_answer_is_wrong_with_its_reason(data):
    from memstack.errors import ProviderUnavailable

    model = ScriptedModel(default=ProviderUnavailable("upstream down"))
    report = run("memorybank-cn", data, systems_for(baselines=["oracle"]), model=model, limit=1)
    row = report["systems"]["oracle"]["answers"][0]
    assert row["correct"] is False and "upstream down" in row["error"]
    assert report["systems"]["oracle"]["errors"] == 1


def test_llm_judge_verdict_is_the_accuracy(data):
    model = ScriptedModel(default=reader)
    judge = ScriptedModel(default='{"correct": false}')
    report = run("memorybank-cn", data, systems_for(baselines=["oracle"]), model=model, judge=judge, limit=2)
    assert report["systems"]["oracle"]["accuracy"] == 0.0 and report["systems"]["oracle"]["rule_accuracy"] == 1.0
    prompt = judge.calls[0]["messages"][-1]["content"]
    assert "Gold answer: 麻薯" in prompt and "CORRECT only if" in prompt


# ---- the command ---------------------------------------------------------------------------------


def test_cli_runs_against_an_openai_compatible_model_and_prints_a_table(data, tmp_path):
    with CannedOpenAI(lambda body: reader(body["messages"])) as upstream:
        env = {**os.environ, "MEMSTACK_HOME": str(tmp_path / "home")}
        args = [
            sys.executable,
            "-m",
            "memstack",
            "bench",
            "qa",
            "--dataset",
            "memorybank-cn",
            "--data",
            str(data),
            "--strategy",
            "window,retrieval",
            "--baselines",
            "none,oracle",
            "--model",
            upstream.model,
            "--answers",
            str(tmp_path / "a.jsonl"),
        ]
        proc = subprocess.run(args, capture_output=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr.decode()
        table = proc.stdout.decode()
        assert "| window,retrieval | 1.000 | 1.00 |" in table and "| none | 0.000 |" in table
        assert "\r" not in proc.stderr.decode() and "12/12 (100%)" in proc.stderr.decode()  # piped: plain lines
        assert "window,retrieval: ingesting 王芳 (8 turns)" in proc.stderr.decode()
        rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()]
        assert len(rows) == 12 and {r["system"] for r in rows} == {"window,retrieval", "none", "oracle"}
        proc = subprocess.run(
            [*args[:9], "--baselines", "oracle", "--model", upstream.model, "--json", "--limit", "1"],
            capture_output=True,
            env=env,
            timeout=300,
        )
        report = json.loads(proc.stdout.decode())
        assert report["systems"]["oracle"]["accuracy"] == 1.0 and "answers" in report["systems"]["oracle"]


def test_cli_refuses_unknown_baselines(data, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "memstack", "bench", "qa", "--dataset", "memorybank-cn", "--data", str(data), "--baselines", "nope"],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "baseline" in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()


def test_progress_draws_in_place_on_a_terminal_and_prints_lines_when_piped():
    piped = io.StringIO()
    with Progress(stream=piped, tty=False) as p:
        for i in range(1, 101):
            p(i, 100, "x")
    lines = piped.getvalue().splitlines()
    assert "\r" not in piped.getvalue() and len(lines) == 21 and lines[-1] == "100/100 (100%) x"
    tty = io.StringIO()
    with Progress(stream=tty, tty=True) as p:
        p(1, 2, "a")
        p(2, 2, "b")
    assert tty.getvalue().count("\r") == 2 and tty.getvalue().endswith("\n")


@pytest.mark.local_model
@pytest.mark.timeout(300)
def test_the_local_model_answers_from_the_oracle_and_not_without_memory(data):
    pytest.importorskip("xllamacpp")
    report = run("memorybank-cn", data, systems_for(baselines=["none", "oracle"]), limit=2)
    assert report["systems"]["oracle"]["accuracy"] == 1.0, report["systems"]["oracle"]["answers"]
    assert report["systems"]["none"]["accuracy"] == 0.0, report["systems"]["none"]["answers"]


# ---- helpers -------------------------------------------------------------------------------------


def _write(obj):
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    return f.name


def _question(answer, text="where?"):
    from memstack.evaluation.datasets import Question

    return Question("q", text, frozenset(), "single-hop", datetime(2026, 1, 1, tzinfo=timezone.utc), answer)
