"""Entity memory as users change their minds (issue 12, §2 and §4.3/§4.4): values that accumulate
keep every one, a value that replaces another supersedes it and the old one stays, dated, as past;
the user's own entity is reached by "我/my" and by the name they introduced themself with.

The model's answers are scripted (exact statements through the real Extractor) on a real SQLite
store; the contexts asserted are what a chat model would read."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from chats import statements, system, turns_from

from memstack import Memory
from memstack.testing import ScriptedModel

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


out = statements


turns = turns_from(T0)


def memory(tmp_path, layers, answers):
    return Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=layers, options={"model": ScriptedModel(answers), "batch_messages": 2})


def said(mem, *batches):
    """Each batch: (turn texts, start time): added and extracted in order."""
    for texts, start in batches:
        mem.add(turns(texts, start), user_id="u", thread_id="t")
        assert mem.run_jobs().failed == 0


def user_entity(mem):
    return mem.store.records.current(mem.scope("u"), "entity", ["user"])[0].value


def test_predicates_that_accumulate_keep_every_value(tmp_path):
    mem = memory(
        tmp_path,
        ["entities"],
        [
            out(("用户", "人物", "使用", "SpringBoot")),
            out(("用户", "人物", "使用", "Elasticsearch")),
            out(("用户", "人物", "使用", "Redis")),
        ],
    )
    said(
        mem,
        (["我的后端使用SpringBoot", "好的"], T0),
        (["文档检索使用Elasticsearch", "好的"], T0 + timedelta(days=1)),
        (["缓存使用Redis", "收到"], T0 + timedelta(days=2)),
    )
    uses = user_entity(mem)["attributes"]["使用"]
    assert [v["value"] for v in uses["values"]] == ["SpringBoot", "Elasticsearch", "Redis"] and "past" not in uses
    ctx = mem.context(user_id="u", thread_id="t2", strategy="entities", query="我用了哪些技术？", max_tokens=1000)
    assert (
        "使用=SpringBoot（2026-03-01：“我的后端使用SpringBoot”）、Elasticsearch（2026-03-02：“文档检索使用Elasticsearch”）、Redis（2026-03-03：“缓存使用Redis”）"
        in system(ctx)
    )


def test_a_move_supersedes_the_city_and_the_old_one_is_past_with_its_date(tmp_path):
    mem = memory(
        tmp_path,
        ["entities"],
        [out(("用户", "人物", "住在", "上海")), out(("用户", "人物", "住在", "上海"), ("用户", "人物", "搬到", "深圳"))],
    )
    said(mem, (["我住在上海", "好的"], T0), (["我已经从上海搬到深圳了", "恭喜"], T0 + timedelta(days=61)))
    lives = user_entity(mem)["attributes"]["住在"]
    assert lives["value"] == "深圳" and [p["value"] for p in lives["past"]] == ["上海"]
    assert lives["past"][0]["valid_from"].startswith("2026-03-01") and lives["past"][0]["until"].startswith("2026-05-01")
    history = mem.store.records.history(mem.scope("u"), "entity", "user")
    assert history[0].value["attributes"]["住在"]["value"] == "上海" and history[0].invalid_at is not None
    ctx = mem.context(user_id="u", thread_id="t2", strategy="profile", query="我现在住在哪里？", max_tokens=1000)
    assert "住在=深圳（自2026-05-01：“我已经从上海搬到深圳了”；此前：上海，2026-03-01起）" in system(ctx)


def test_a_change_cue_replaces_a_value_that_would_otherwise_accumulate(tmp_path):
    mem = memory(tmp_path, ["entities"], [out(("订单服务", "项目", "使用", "Java")), out(("订单服务", "项目", "改用", "Go"))])
    said(mem, (["订单服务使用Java开发", "好的"], T0), (["订单服务已经全部改用Go重写了", "不错"], T0 + timedelta(days=10)))
    uses = mem.store.records.current(mem.scope("u"), "entity", ["订单服务"])[0].value["attributes"]["使用"]
    assert uses["value"] == "Go" and [p["value"] for p in uses["past"]] == ["Java"]


def test_english_moves_render_current_and_before(tmp_path):
    mem = memory(tmp_path, ["entities"], [out(("User", "person", "lives in", "Shanghai")), out(("User", "person", "moved to", "Shenzhen"))])
    said(mem, (["I live in Shanghai", "ok"], T0), (["I moved to Shenzhen last week", "nice"], T0 + timedelta(days=61)))
    ctx = mem.context(user_id="u", thread_id="t2", strategy="profile", query="Where do I live now?", max_tokens=1000)
    assert 'lives in=Shenzhen (since 2026-05-01: "I moved to Shenzhen last week"; before: Shanghai, from 2026-03-01)' in system(ctx)


def test_a_new_employer_replaces_the_old_one_without_a_cue(tmp_path):
    mem = memory(tmp_path, ["entities"], [out(("用户", "人物", "就职于", "阿里巴巴")), out(("用户", "人物", "入职", "字节跳动"))])
    said(mem, (["我就职于阿里巴巴", "好的"], T0), (["下个月我入职字节跳动", "恭喜"], T0 + timedelta(days=30)))
    work = user_entity(mem)["attributes"]["工作单位"]
    assert work["value"] == "字节跳动" and [p["value"] for p in work["past"]] == ["阿里巴巴"]


def test_a_self_introduction_makes_the_name_the_users_own_entity(tmp_path):
    # the model wrote the name as the subject and never said it is the user
    mem = memory(tmp_path, ["entities", "graph"], [out(("小李", "人物", "是", "程序员"), ("小李", "人物", "开发", "星图"))])
    said(mem, (["我叫小李，是一名程序员，最近在开发星图", "你好小李"], T0))
    keys = {r.key for r in mem.store.records.current(mem.scope("u"), "entity")}
    assert "小李" not in keys and "user" in keys  # one entity: 小李 is the user
    me = user_entity(mem)
    assert "小李" in me["aliases"] and me["attributes"]["是"]["value"] == "程序员"
    profile = system(mem.context(user_id="u", thread_id="t2", strategy="profile", query="我是做什么的？", max_tokens=1000))
    assert "小李" in profile and "程序员" in profile
    for question in ("小李在开发什么？", "我在开发什么？"):
        assert "星图" in system(mem.context(user_id="u", thread_id="t2", strategy="graph", query=question, max_tokens=1000)), question


def test_a_name_relation_to_the_user_joins_the_users_entity(tmp_path):
    mem = memory(tmp_path, ["entities"], [out(("用户", "人物", "叫", "小李"), ("小李", "人物", "职业", "程序员"))])
    said(mem, (["我叫小李，是一名程序员", "你好小李"], T0))
    assert "小李" not in {r.key for r in mem.store.records.current(mem.scope("u"), "entity")}
    me = user_entity(mem)
    assert me["aliases"] == ["小李"] and me["attributes"]["职业"]["value"] == "程序员"


def test_the_rule_that_decides_accumulate_or_replace():
    from memstack.layers.supersede import canonical, replaced, said_as_old, single_valued

    assert canonical("已经搬到") == canonical("住在") == "住在" and canonical("改用") == "使用" and canonical("moved to") == "lives in"
    assert (
        single_valued("住在")
        and single_valued("发布时间")
        and single_valued("works at")
        and not single_valued("使用")
        and not single_valued("喜欢")
    )
    assert replaced("住在", "我住在深圳", ["上海"], "深圳") == ["上海"]  # one city at a time, cue or not
    assert replaced("喜欢", "我也喜欢爬山", ["游泳"], "爬山") == []  # likes accumulate
    assert replaced("使用", "服务已经全部改用Go重写了", ["Java"], "Go") == ["Java"]
    assert replaced("使用", "我们把缓存从Redis换成了Memcached", ["SpringBoot", "Redis"], "Memcached") == ["Redis"]
    assert replaced("使用", "缓存改用Memcached", ["SpringBoot", "Redis"], "Memcached") == []  # which one? keep both
    # ... unless the values' own words say: the one whose clause names what the change names before its cue
    said_once = "后端使用SpringBoot，文档检索使用Elasticsearch，缓存使用Redis。"
    evidence = dict.fromkeys(["SpringBoot", "Elasticsearch", "Redis"], said_once)
    assert replaced("使用", "缓存改用Memcached了。", list(evidence), "Memcached", evidence=evidence) == ["Redis"]
    assert replaced("使用", "我们把缓存换成了Memcached。", list(evidence), "Memcached", evidence=evidence) == ["Redis"]
    assert replaced("使用", "我们改用Memcached了。", list(evidence), "Memcached", evidence=evidence) == []  # no topic: keep all
    both = dict.fromkeys(["Firebase", "React Native"], "Our app is built with React Native and uses Firebase for the backend.")
    assert replaced("uses", "Our backend now uses Supabase.", list(both), "Supabase", evidence=both) == []  # one clause names both
    assert said_as_old("上海", "我已经从上海搬到深圳了") and not said_as_old("深圳", "我已经从上海搬到深圳了")
    assert not said_as_old("北京", "明天从北京出发")  # no change said: not an old value
    assert said_as_old("Java", "We no longer use Java") and said_as_old("Shanghai", "I moved from Shanghai to Shenzhen")


def test_an_english_self_introduction_and_a_false_one(tmp_path):
    mem = memory(tmp_path, ["entities"], [out(("Li Lei", "person", "is", "engineer")), out(("用户", "人物", "叫了", "外卖"))])
    said(mem, (["My name is Li Lei, I'm an engineer", "hi Li Lei"], T0), (["我叫了外卖", "好的"], T0 + timedelta(hours=1)))
    assert "li lei" not in {r.key for r in mem.store.records.current(mem.scope("u"), "entity")}
    assert user_entity(mem)["aliases"] == ["Li Lei"]  # and 外卖 is not a name of the user


def test_a_statement_the_model_repeats_until_the_list_is_full_is_kept_once(tmp_path):
    looping = out(("用户", "人物", "教", "语文"), *[("用户", "人物", "教", "语文 ")] * 14, ("用户", "人物", "住在", "绍兴"))
    mem = memory(tmp_path, ["entities", "graph"], [looping])
    said(mem, (["我住在绍兴，在一所初中教语文", "好的"], T0))
    attributes = user_entity(mem)["attributes"]
    assert [v["value"] for v in attributes["教"]["values"]] == ["语文"] and "住在" in attributes
    relations = mem.store.records.current(mem.scope("u"), "relation")
    assert len(relations) == 2


def test_a_bare_name_is_a_graph_node_not_a_line_of_the_entities_section(tmp_path):
    # "SpringBoot" becomes an entity of its own (a node for multi-hop paths), with nothing to say
    mem = memory(tmp_path, ["entities"], [out(("用户", "人物", "使用", "SpringBoot"))])
    said(mem, (["我的后端用SpringBoot", "好的"], T0))
    stored = {r.value["name"] for r in mem.store.records.current(mem.scope("u"), "entity")}
    assert "SpringBoot" in stored
    text = system(mem.context(user_id="u", thread_id="t2", query="我的后端用什么？", max_tokens=2000))
    assert "使用=SpringBoot" in text
    assert "- SpringBoot" not in text


def test_the_profile_shows_what_the_question_names_and_who_the_user_is_not_every_verb(tmp_path):
    """A small model's profile holds every verb the user used; shown whole, "跑=…3月15号…" stood
    before the model asked for a birthday. The profile shows the attributes the question names,
    those that say who the user is, and a few of those that changed (none here)."""
    hobbies = ["游泳", "滑雪", "钓鱼", "爬山", "下棋", "插花", "烘焙", "骑行"]
    first = [("用户", "人物", "住在", "长沙"), ("用户", "人物", "生日", "2月13日"), ("用户", "人物", "跑", "3月15号")]
    verbs = ["练", "会", "常去", "学过", "报了", "参加", "玩", "做"]  # (an attribute's name never holds its value: not "学游泳=游泳")
    later = [("用户", "人物", v, h) for v, h in zip(verbs, hobbies, strict=True)]
    mem = memory(tmp_path, ["entities"], [out(*first), out(*later)])
    said(
        mem,
        (["我住在长沙，生日是2月13日，3月15号跑了30公里。", "好的"], T0),
        (["我" + "，".join(v + h for v, h in zip(verbs, hobbies, strict=True)) + "。", "真丰富"], T0 + timedelta(days=3)),
    )
    asked = system(mem.context(user_id="u", thread_id="t2", strategy="profile", query="我的生日是几月几号？", max_tokens=1000))
    assert "生日=2月13日" in asked and "住在=长沙" in asked and "3月15号" not in asked
    assert asked.index("生日=2月13日") < asked.index("住在=长沙")  # what the question names first
    assert not any(f"{v}={h}" in asked for v, h in zip(verbs, hobbies, strict=True))  # unchanged and not named: left out
    named = system(mem.context(user_id="u", thread_id="t2", strategy="profile", query="我会滑雪吗？", max_tokens=1000))
    assert "会=滑雪" in named and "练=游泳" not in named
    whole = system(mem.context(user_id="u", thread_id="t2", strategy="profile", max_tokens=1000))
    assert "3月15号" in whole  # without a question, the whole profile


def test_the_users_name_alone_is_no_line_unless_the_question_asks_for_it(tmp_path):
    # a user line with nothing but the name above the turns drew the local model away from them
    mem = memory(tmp_path, ["entities", "retrieval"], [out(("贺小满", "人物", "是", "用户"))])
    said(mem, (["你好，我叫贺小满。我家狗叫年糕，是只柯基。", "你好贺小满！"], T0))
    dog = system(mem.context(user_id="u", thread_id="t2", query="我养的那只柯基叫什么名字？", max_tokens=1000))
    assert "贺小满" in dog and "又名贺小满" not in dog  # the turn says it; no entity line of the name alone
    me = system(mem.context(user_id="u", thread_id="t2", query="我叫什么名字？", max_tokens=1000))
    assert "又名贺小满" in me


def test_the_users_name_as_an_attribute_or_a_relation_is_shown_only_for_a_question_about_it(tmp_path):
    # "用户：是=钟一鸣" and "用户 —是→ 钟一鸣" beside "我女朋友在哪个城市？" drew the local model to
    # another turn (LifeAssist-CN); the name is for a question about the name
    mem = memory(tmp_path, ["entities", "graph", "retrieval"], [out(("用户", "人物", "是", "许知远"), ("用户", "人物", "住在", "长沙"))])
    said(mem, (["你好，我叫许知远，住在长沙。女朋友在长沙做建筑师。", "你好许知远！"], T0))
    other = system(mem.context(user_id="u", thread_id="t2", query="我女朋友在哪个城市工作？", max_tokens=1000))
    lines = [x for x in other.splitlines() if x.startswith("- ")]
    assert not [x for x in lines if "是=许知远" in x or "—是→ 许知远" in x], lines
    me = system(mem.context(user_id="u", thread_id="t2", query="我叫什么名字？", max_tokens=1000))
    assert "许知远" in "\n".join(x for x in me.splitlines() if x.startswith("- "))


def test_a_question_about_what_the_assistant_said_gets_the_turns_not_the_users_facts(tmp_path):
    # beside "你建议我保留一款多少钱的实惠面？" the profile line 开=面馆 turned the answer from "保留12元的素面"
    # into "12元" (LifeAssist-CN): the assistant's words answer it, and retrieval shows them
    mem = memory(tmp_path, ["entities", "graph", "retrieval"], [out(("用户", "人物", "开", "面馆"), ("用户", "人物", "住在", "西安"))])
    said(mem, (["我在西安开了一家面馆，想涨价。", "可以涨一点，但保留一款12块的素面给老顾客。"], T0))
    asked = mem.context(user_id="u", thread_id="t2", query="我想涨价的时候，你建议我保留一款多少钱的面？", max_tokens=1000)
    assert "12块的素面" in system(asked) and not [k for k in asked.sections if k in ("memory:entities", "memory:graph")]
    mine = mem.context(user_id="u", thread_id="t2", query="我的面馆开在哪个城市？", max_tokens=1000)
    assert "memory:entities" in mine.sections


def test_a_question_about_now_gets_no_value_that_ended_with_nothing_in_its_place(tmp_path):
    # "练=（目前未知；此前：力量）" was read as the answer to "我现在怎么锻炼？" (the fact set, local model)
    mem = memory(
        tmp_path,
        ["entities", "graph"],
        [out(("用户", "人物", "办", "攀岩馆的年卡"), ("用户", "人物", "练", "抱石"), ("用户", "人物", "住在", "苏州")), out()],
    )
    said(
        mem,
        (["我办了攀岩馆的年卡，主要练抱石。我住在苏州。", "好的"], T0),
        (["我已经不去攀岩馆了，改成在小区里游泳。", "也不错"], T0 + timedelta(days=30)),
    )

    def facts(query):
        ctx = mem.context(user_id="u", thread_id="t2", strategy="entities,graph", query=query, max_tokens=1000)
        return system(ctx)

    now = facts("我现在怎么锻炼？")
    assert "抱石" not in now and "攀岩馆" not in now
    assert "住在=苏州" in facts("我现在住在哪里？")  # a current value stays
    still = facts("我还在练抱石吗？")  # whether it still holds: the ended value answers it
    assert "抱石" in still and "已不成立" in still
    still = facts("我现在还练抱石吗？")  # 还 before the verb of a yes-no question: still, not now only
    assert "抱石" in still and "已不成立" in still


def test_a_user_who_writes_in_both_languages_has_one_city(tmp_path):
    # "住在" said in Chinese, then "I'm in Vancouver now" in English: one attribute, the newer
    # value current; the key stays the one first written, and "lives" is a spelling of "lives in"
    mem = memory(
        tmp_path,
        ["entities"],
        [out(("用户", "人物", "住在", "成都")), out(("User", "person", "lives", "Vancouver"))],
    )
    said(
        mem,
        (["我住在成都，做翻译。", "好的"], T0),
        (["Big news: I live in Vancouver now, moved last month.", "Congrats!"], T0 + timedelta(days=90)),
    )
    attributes = user_entity(mem)["attributes"]
    assert list(attributes) == ["住在"]
    assert attributes["住在"]["value"] == "Vancouver" and [p["value"] for p in attributes["住在"]["past"]] == ["成都"]
    ctx = mem.context(user_id="u", thread_id="t2", strategy="profile", query="Where do I live now?", max_tokens=1000)
    assert "住在=Vancouver" in system(ctx) and "此前：成都" in system(ctx)


def test_values_stored_under_each_languages_key_are_read_as_one_attribute():
    from memstack.layers.attributes import settled_attributes

    attributes = {
        "住在": {"value": "成都", "source_ids": ["m1"], "valid_from": "2026-03-01T09:00:00+00:00"},
        "lives in": {"value": "Vancouver", "source_ids": ["m2"], "valid_from": "2026-06-01T09:00:00+00:00"},
        "job": {"value": "translator", "source_ids": ["m2"], "valid_from": "2026-06-01T09:00:00+00:00"},
    }
    settled = settled_attributes(attributes)
    key, now, before = settled["住在"]
    assert key == "住在" and [v["value"] for v in now] == ["Vancouver"] and [v["value"] for v in before] == ["成都"]
    assert [v["value"] for v in settled["职业"][1]] == ["translator"]


def test_an_entity_the_question_neither_names_nor_shares_a_word_with_is_left_out(tmp_path):
    mem = memory(tmp_path, ["entities"], [out(("李四", "人物", "住在", "上海"), ("王五", "人物", "使用", "Kafka"))])
    said(mem, (["李四住在上海。王五使用Kafka。", "好的"], T0))

    def shown(query):
        return system(mem.context(user_id="u", thread_id="t2", strategy="entities", query=query, max_tokens=1000))

    assert "李四" in shown("李四住在哪个城市？") and "王五" not in shown("李四住在哪个城市？")
    assert "王五" in shown("谁在用Kafka？") and "李四" not in shown("谁在用Kafka？")  # a word of its attributes
    assert "李四" in shown("怎么样？") and "王五" in shown("怎么样？")  # no word that names anything: all


def test_a_city_and_the_longer_name_that_holds_it_said_together_are_both_current(tmp_path):
    # "也从上海搬到杭州余杭了": the move rule reads 杭州 (jieba tags 余杭 apart), the model 杭州余杭
    mem = memory(
        tmp_path,
        ["entities"],
        [out(("用户", "人物", "住在", "上海")), out(("用户", "人物", "搬到", "杭州余杭"), ("用户", "人物", "搬到", "杭州"))],
    )
    said(mem, (["我住在上海。", "好的"], T0), (["我跳槽了，也从上海搬到杭州余杭了。", "恭喜"], T0 + timedelta(days=40)))
    lives = user_entity(mem)["attributes"]["住在"]
    assert sorted(v["value"] for v in lives["values"]) == ["杭州", "杭州余杭"] and [p["value"] for p in lives["past"]] == ["上海"]


def test_a_kin_word_names_the_users_person_across_languages(tmp_path):
    # "我老婆是做什么的？" over "wife=Chen Yu", said in English: 老婆 shares no word with "wife"
    mem = memory(
        tmp_path,
        ["entities"],
        [out(("User", "人物", "wife", "Chen Yu"), ("User", "人物", "likes", "skiing"), ("User", "人物", "drives", "a Volvo"))],
    )
    said(mem, (["My wife Chen Yu joined me last week. I like skiing and I drive a Volvo.", "Nice!"], T0))
    asked = system(mem.context(user_id="u", thread_id="t2", strategy="entities", query="我老婆叫什么名字？", max_tokens=1000))
    assert "wife=Chen Yu" in asked and "skiing" not in asked
    assert "wife=Chen Yu" not in system(
        mem.context(user_id="u", thread_id="t2", strategy="entities", query="我喜欢滑雪吗？", max_tokens=1000)
    )
