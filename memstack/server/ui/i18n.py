"""The dashboard's words in English and Chinese, chosen by the browser's Accept-Language."""

from __future__ import annotations

from typing import Any

TEXT: dict[str, tuple[str, str]] = {
    # (English, Chinese)
    "title": ("memstack dashboard", "memstack 记忆面板"),
    "users": ("Users", "用户"),
    "user": ("User", "用户"),
    "search_id": ("Search by user id", "按用户 ID 搜索"),
    "search": ("Search", "搜索"),
    "threads": ("Threads", "会话"),
    "thread": ("Thread", "会话"),
    "messages": ("Messages", "消息"),
    "memories": ("Memories", "记忆"),
    "jobs_waiting": ("Jobs waiting", "待处理任务"),
    "model_tokens": ("Model tokens", "模型 Token"),
    "last_active": ("Last active", "最近活动"),
    "no_users": ("No users yet.", "还没有用户。"),
    "shown": ("{shown} of {total}", "共 {total} 个，显示 {shown} 个"),
    "older": ("Earlier", "更早"),
    "newer": ("Later", "更新"),
    "overview": ("Overview", "概览"),
    "graph": ("Graph", "知识图谱"),
    "context": ("What the model sees", "模型看到什么"),
    "audit": ("Audit log", "审计日志"),
    "usage": ("Usage", "用量"),
    "cost_budget": ("Budget", "预算"),
    "spent_of": (
        "{spent} spent, {running} running, of {tokens} tokens/{period}",
        "已用 {spent}，运行中 {running}，上限 {tokens} tokens/{period}",
    ),
    "resets": ("resets {at}", "{at} 重置"),
    "profile": ("Profile", "用户画像"),
    "entities": ("Entities", "实体"),
    "relations": ("Relations", "关系"),
    "state": ("State", "结构化状态"),
    "summaries": ("Summary notes", "摘要笔记"),
    "no_memories": ("Nothing remembered yet.", "暂无记忆。"),
    "attribute": ("Attribute", "属性"),
    "value": ("Value", "值"),
    "current": ("current", "当前"),
    "past": ("before", "此前"),
    "since": ("since {day}", "自{day}"),
    "until": ("until {day}", "至{day}"),
    "history": ("History", "历史版本"),
    "version": ("Version", "版本"),
    "valid_from": ("True from", "生效于"),
    "replaced_at": ("Replaced", "失效于"),
    "still_current": ("current", "当前"),
    "aliases": ("Also called", "又名"),
    "edit": ("Edit", "编辑"),
    "save": ("Save", "保存"),
    "delete": ("Delete", "删除"),
    "add_attribute": ("Set an attribute", "设置属性"),
    "set_state": ("Set a state key", "设置状态键"),
    "key": ("Key", "键"),
    "as_text": ("text", "文本"),
    "as_json": ("JSON", "JSON"),
    "forget_thread": ("Forget this thread", "删除此会话"),
    "forget_user": ("Forget this user", "删除此用户"),
    "type_to_confirm": ("Type {what} to confirm", "输入 {what} 以确认"),
    "forget_warning": (
        "Deletes the messages and every memory made of them. This cannot be undone.",
        "将删除消息及由此产生的全部记忆，无法恢复。",
    ),
    "confirm_mismatch": ("The confirmation did not match; nothing was deleted.", "确认内容不一致，未删除任何内容。"),
    "done_saved": ("Saved; the change is in the audit log.", "已保存，变更已记入审计日志。"),
    "done_deleted": ("Deleted; the change is in the audit log.", "已删除，变更已记入审计日志。"),
    "done_forgot_thread": (
        "The thread was forgotten ({n} rows); the deletion log keeps a note of it, without its content.",
        "会话已删除（{n} 行）；删除日志记下了这次删除，不含内容。",
    ),
    "done_forgot_user": (
        "The user was forgotten ({n} rows); the deletion log keeps a note of it, without its content.",
        "用户已删除（{n} 行）；删除日志记下了这次删除，不含内容。",
    ),
    "done_forgot_saved": (
        "The saved memory was forgotten; the deletion log keeps a note of it, without its text.",
        "已删除这条保存的记忆；删除日志记下了这次删除，不含内容。",
    ),
    "saved": ("Saved", "保存的记忆"),
    "saved_memories": ("Saved memories", "保存的记忆"),
    "no_saved": ("Nothing saved through the memory tools.", "没有通过记忆工具保存的内容。"),
    "category": ("Category", "类别"),
    "key_value": ("key/value", "键值"),
    "forgotten": ("forgotten", "已删除"),
    "forgot": ("forgotten", "已删除"),
    "forgot_user": ("the user", "用户"),
    "forgot_thread": ("a thread", "会话"),
    "forgot_note": ("a saved memory", "保存的记忆"),
    "forgot_expired": ("expired memory", "过期的记忆"),
    "retention": ("Retention", "保留期限"),
    "retention_none": (
        "Everything is kept (no retention policy: memstack init --retain).",
        "全部保留（未设置保留期限：memstack init --retain）。",
    ),
    "retention_last": ("Last pass", "上次清理"),
    "retention_never": ("no pass yet", "尚未清理"),
    "forgot_rows": ("{n} rows", "{n} 行"),
    "forget_explained": (
        "What was forgotten is gone: the note keeps what, when and by whom, not the content.",
        "删除的内容已不复存在：这里只记下删了什么、何时、由谁删除，不含内容。",
    ),
    "counted_messages": ("messages", "消息"),
    "counted_memories": ("memories", "记忆"),
    "counted_audit": ("audit events", "审计记录"),
    "counted_usage": ("model calls", "模型调用"),
    "counted_units": ("retrieval units", "检索单元"),
    "counted_vectors": ("vectors", "向量"),
    "counted_other": ("other", "其他"),
    "deletion_log": ("Deletion log", "删除日志"),
    "deletion_log_hint": (
        "Every forgotten user, thread and saved memory of the tenant. A note keeps no content and no id: the user is a keyed hash, the same in each of their notes.",
        "本租户每一次删除（用户、会话、保存的记忆）。记录不含内容和 ID：用户以带密钥的哈希表示，同一用户的哈希相同。",
    ),
    "no_deletions": ("Nothing was forgotten yet.", "还没有删除记录。"),
    "user_hash": ("the user's keyed hash", "用户的带密钥哈希"),
    "role": ("Role", "角色"),
    "date": ("Date", "时间"),
    "show_all": ("Show all {n}", "显示全部 {n} 条"),
    "showing_last": ("The last {n} of {total} messages.", "显示最近 {n} 条，共 {total} 条。"),
    "query": ("Next user message", "用户的下一句话"),
    "preset": ("Preset", "预设"),
    "stack": ("or a stack of layers", "或层的组合"),
    "store_stack": ("the store's stack", "存储的默认组合"),
    "budget": ("Token budget", "Token 预算"),
    "build": ("Build the context", "构建上下文"),
    "tokens": ("tokens", "tokens"),
    "tokens_per_section": ("Tokens per section", "各部分的 Token"),
    "dropped": ("Left out", "被舍弃的内容"),
    "nothing_dropped": ("Nothing was left out.", "没有舍弃任何内容。"),
    "reason": ("Reason", "原因"),
    "layer": ("Layer", "层"),
    "section": ("Section", "部分"),
    "kind": ("Kind", "类型"),
    "action": ("Action", "操作"),
    "all_kinds": ("all kinds", "全部类型"),
    "filter": ("Filter", "筛选"),
    "no_events": ("No audit events.", "没有审计记录。"),
    "calls": ("Calls", "调用次数"),
    "failed": ("Failed", "失败"),
    "prompt_tokens": ("Prompt tokens", "输入 Token"),
    "completion_tokens": ("Completion tokens", "输出 Token"),
    "per_day": ("Model tokens per day", "每日模型 Token"),
    "no_usage": ("No model calls yet.", "还没有模型调用。"),
    "model": ("Model", "模型"),
    "evidence": ("Evidence", "证据"),
    "alias": ("alias", "别名"),
    "click_edge": ("Click a node or an edge to see its evidence.", "点击节点或边查看证据。"),
    "nodes_edges": ("{nodes} entities, {edges} relations", "{nodes} 个实体，{edges} 条关系"),
    "no_relations": ("No relations yet.", "暂无关系。"),
    "login": ("Log in", "登录"),
    "logout": ("Log out", "退出"),
    "api_key": ("API key", "API 密钥"),
    "login_hint": ("The dashboard shows the users of the key's tenant.", "面板只显示该密钥所属租户的用户。"),
    "bad_key": ("Unknown API key.", "未知的 API 密钥。"),
    "tenant": ("Tenant", "租户"),
    "error": ("Error", "错误"),
    "refused_csrf": (
        "The form was not sent by this dashboard (a missing or stale token): reload the page and try again.",
        "表单不是由本面板提交的（令牌缺失或过期）：请刷新页面后重试。",
    ),
    "refused_loopback": (
        "Without API keys the dashboard answers only on this machine (127.0.0.1 or localhost).",
        "未配置 API 密钥时，面板只接受本机访问（127.0.0.1 或 localhost）。",
    ),
    "no_such_user": ("No user {user!r}.", "没有用户 {user!r}。"),
    "no_such_thread": ("User {user!r} has no thread {thread!r}.", "用户 {user!r} 没有会话 {thread!r}。"),
    "no_such_entity": ("No entity {key!r}.", "没有实体 {key!r}。"),
    "back": ("Back", "返回"),
    "confidence": ("Confidence", "置信度"),
    "sources": ("Sources", "来源"),
    "jobs_note": (
        "{n} jobs waiting: the newest messages may not be in the memories yet.",
        "还有 {n} 个任务待处理：最新的消息可能尚未进入记忆。",
    ),
    "none": ("none", "无"),
    "view": ("View", "查看"),
    "before_value": ("before", "之前"),
    "after_value": ("after", "之后"),
    "page_size_note": ("users shown per page", "每页显示的用户"),
}


def language(accept: str | None) -> str:
    """ "zh" when the browser prefers Chinese to English (by q-value, then order), else "en"."""
    best: tuple[float, int, str] | None = None
    for i, part in enumerate((accept or "").split(",")):
        tag, _, params = part.strip().partition(";")
        tag = tag.strip().lower()
        q = 1.0
        for p in params.split(";"):
            name, _, value = p.strip().partition("=")
            if name == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        lang = "zh" if tag.startswith("zh") else "en" if tag.startswith("en") else None
        if lang and q > 0 and (best is None or (q, -i) > (best[0], best[1])):
            best = (q, -i, lang)
    return best[2] if best else "en"


def translator(lang: str):
    index = 1 if lang == "zh" else 0

    def t(key: str, **values: Any) -> str:
        words = TEXT[key][index]
        return words.format(**values) if values else words

    return t
