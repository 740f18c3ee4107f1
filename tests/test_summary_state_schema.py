"""A state schema's keys reach the model: listed in the prompt with their meaning, and an enum in
the JSON schema a grammar-constrained model follows (keys outside it are still left out)."""

from __future__ import annotations

import json

from memstack import Memory
from memstack.testing import ScriptedModel


def test_the_schema_keys_are_asked_for_and_constrained():
    schema = {"type": "object", "properties": {"出发地": {"type": "string", "description": "出发城市"}, "预算": {"type": "string"}}}
    model = ScriptedModel(
        [json.dumps({"state": [{"key": "出发地", "value": "北京"}, {"key": "机票类型", "value": "经济舱"}]}, ensure_ascii=False)],
        native_schema=True,
    )
    mem = Memory("memory://", layers=["state"], options={"model": model, "batch_messages": 2, "state_schema": schema})
    mem.add(
        [{"role": "user", "content": "下周五从北京飞上海，经济舱"}, {"role": "assistant", "content": "好的，我来查询。"}],
        user_id="u",
        thread_id="t",
    )
    assert mem.flush().failed == 0
    call = model.calls[0]
    assert "出发地（出发城市）" in call["messages"][0]["content"] and "预算" in call["messages"][0]["content"]
    assert call["schema"]["properties"]["state"]["items"]["properties"]["key"]["enum"] == ["出发地", "预算"]
    assert [r.key for r in mem.store.records.current(mem.scope("u"), "state")] == ["出发地"]
