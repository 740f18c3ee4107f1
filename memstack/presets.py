"""The articles' scenario stacks by name: which layers, and how the budget is split between them.

    Memory(preset="personal-assistant")        # layers and options of the preset
    memstack context --preset medical ...

A preset is data: a stack of registered layers and per-layer options ("retrieval.share" reaches
only the retrieval layer); the memory layers' shares add up to at most half of the budget, the
memory sections' floor in ``Memory.context``. A share is a cap for the first pass, not a
reservation: what the conversation and the other layers leave unused goes to the layers that hit
their cap, retrieval first (see ``memstack.memory``). The articles' table (业务场景 -> 推荐组合) maps one-to-one:

    普通客服机器人      customer-service       全量历史 + 滑动窗口
    长期个人 AI 助手    personal-assistant     摘要 + 用户画像 + 向量检索
    企业知识助手        enterprise-knowledge   实体记忆 + 向量检索 + 知识图谱
    长期项目开发 Agent  project-agent          摘要 + 实体记忆 + 项目专题记忆
    医疗咨询助手        medical                实体记忆 + 知识图谱 + 证据溯源
    复杂任务型 Agent    task-agent             Checkpointer + 摘要 + 长期记忆 Store
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import UnknownName


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    #: the articles' name of the scenario and of the combination
    scenario: str
    layers: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    #: when to use it, in one sentence
    when: str = ""


PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        p.name: p
        for p in (
            Preset(
                "customer-service",
                "普通客服机器人：全量历史 + 滑动窗口",
                ("full", "window"),
                {"k": 10},
                "Short support conversations: the whole thread while it is short, the last 10 turns once it is not; no model calls.",
            ),
            Preset(
                "personal-assistant",
                "长期个人 AI 助手：摘要 + 用户画像 + 向量检索",
                ("summary-buffer", "profile", "retrieval"),
                {"summary-buffer.share": 0.2, "profile.share": 0.1, "retrieval.share": 0.2, "buffer_tokens": 800},
                "One user over months: a summary of this conversation, who the user is, and what they said in earlier sessions.",
            ),
            Preset(
                "enterprise-knowledge",
                "企业知识助手：实体记忆 + 向量检索 + 知识图谱",
                ("window", "entities", "graph", "retrieval"),
                {"k": 6, "entities.share": 0.15, "graph.share": 0.15, "retrieval.share": 0.2},
                "Questions about projects, systems and people: the entities named, their relations (multi-hop), and the passages behind them.",
            ),
            Preset(
                "project-agent",
                "长期项目开发 Agent：摘要 + 实体记忆 + 项目专题记忆",
                ("summary-buffer", "entities", "topic"),
                {"summary-buffer.share": 0.2, "entities.share": 0.15, "topic.share": 0.15, "buffer_tokens": 800},
                "A long-running project: the summary, the project's entities, and memories of the current topic (a message's metadata category).",
            ),
            Preset(
                "medical",
                "医疗咨询助手：实体记忆 + 知识图谱 + 证据溯源",
                ("window", "entities", "graph", "retrieval"),
                {
                    "k": 6,
                    "entities.provenance": True,
                    "graph.provenance": True,
                    "entities.share": 0.15,
                    "graph.share": 0.15,
                    "retrieval.share": 0.2,
                },
                "Where every fact must be traceable: each attribute and relation cites its source message and date.",
            ),
            Preset(
                "task-agent",
                "复杂任务型 Agent：Checkpointer + 摘要 + 长期记忆 Store",
                ("summary-buffer", "state", "retrieval"),
                {"summary-buffer.share": 0.25, "state.share": 0.05, "retrieval.share": 0.2, "buffer_tokens": 800},
                "Multi-step agents: the thread's summary, the user's JSON state, user-scoped retrieval; checkpoint the agent's own state with Memory.store.checkpoints or the LangGraph saver.",
            ),
        )
    }
)


def preset_named(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownName(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
