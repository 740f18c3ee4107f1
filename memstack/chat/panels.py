"""What the chat's commands show, as rich renderables built from plain data (no I/O here).

The context is shown as tables because its point is accounting: which message cost how many
tokens, which memory section took its share, and what the budget left out and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.json import JSON
from rich.markdown import Markdown
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..tokens import TokenCounter
from ..types import Context
from ..views import plural
from .session import Memories

#: characters of a message shown in the /context table; the rest is elided
PREVIEW_CHARS = 160

HELP = """\
| command | what it does |
|---|---|
| *any text* | ask the model; your line and its answer are stored in this thread |
| `/context` | the last context sent: its messages, token cost per part, what was dropped |
| `/memories` | entities, relations, this thread's summary notes, retrieval hits for the last message |
| `/state` | your JSON state |
| `/flush` | make memories now from turns still waiting for a fuller batch |
| `/import FILE` | store a JSON-lines export (`memstack export`) as your messages |
| `/forget` | delete this thread (asks first); `/forget all` deletes you and everything you own |
| `/help` | this table |
| `/quit` | finish the queued memory work and leave (also Ctrl-D) |
"""


def banner(user_id: str, thread_id: str, layers: Sequence[str], model: str) -> Panel:
    body = Text.assemble(
        ("user ", "dim"), user_id, ("  thread ", "dim"), thread_id, ("  model ", "dim"), model, ("\nmemory ", "dim"), " + ".join(layers)
    )
    return Panel(body, title="memstack chat", subtitle="/help for commands, /quit or Ctrl-D to leave", border_style="cyan")


def answer(text: str, model: str) -> Panel:
    return Panel(
        Markdown(text) if text else Text("(the model answered nothing)", style="dim"), title=model, title_align="left", border_style="green"
    )


def help_table() -> Markdown:
    return Markdown(HELP)


def context_view(ctx: Context | None, counter: TokenCounter) -> RenderableType:
    """Three tables: the messages sent (role, tokens, text), the cost of each part and memory
    section, and what was dropped (by which layer, why, how many tokens)."""
    if ctx is None:
        return Text("No context yet: say something first.", style="yellow")
    return Group(_messages_table(ctx, counter), _costs_table(ctx), _dropped_table(ctx))


def _messages_table(ctx: Context, counter: TokenCounter) -> Table:
    budget = "no budget" if ctx.max_tokens is None else f"budget {ctx.max_tokens}"
    table = Table(
        title=f"Context: {plural(len(ctx.messages), 'message')}, {plural(ctx.tokens, 'token')} ({budget}, {ctx.counter})",
        title_justify="left",
        expand=True,
    )
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("text", ratio=1)
    for i, m in enumerate(ctx.messages, 1):
        table.add_row(str(i), m.role, str(counter.count_message(m)), Text(_preview(m.text)))
    return table


def _costs_table(ctx: Context) -> Table:
    table = Table(title="Token cost by part", title_justify="left")
    table.add_column("part")
    table.add_column("tokens", justify="right")
    for name, tokens in ctx.sections.items():
        if tokens:
            table.add_row(Text(name), str(tokens))
    return table


def _dropped_table(ctx: Context) -> RenderableType:
    if not ctx.dropped:
        return Text("Nothing was dropped.", style="dim")
    table = Table(title="Dropped", title_justify="left")
    for column in ("layer", "reason", "messages", "tokens"):
        table.add_column(column, justify="right" if column in ("messages", "tokens") else "left")
    for d in ctx.dropped:
        table.add_row(Text(d.layer), Text(d.reason), str(len(d.message_ids)), str(d.tokens))
    return table


def memories_view(found: Memories) -> RenderableType:
    parts: list[RenderableType] = [_entities_table(found.entities), _relations_text(found.relations), _notes_text(found.notes)]
    if found.hits is not None:
        parts.append(
            Text(f"Retrieval finds {plural(found.hits, 'earlier round')} for your last message ({_preview(found.query or '', 60)!r}).")
        )
    return Group(*parts)


def _entities_table(entities: list[dict[str, Any]]) -> RenderableType:
    if not entities:
        return Text("No entities yet.", style="dim")
    table = Table(title=f"Entities ({len(entities)})", title_justify="left", expand=True)
    for column in ("name", "type", "what is known"):
        table.add_column(column, ratio=1 if column == "what is known" else None)
    for e in entities:
        v = e["value"]
        attrs = "; ".join(f"{k}={a.get('value')}" for k, a in v.get("attributes", {}).items())
        aliases = f"aka {', '.join(v['aliases'])}. " if v.get("aliases") else ""
        known = (aliases + (v.get("description") or "") + (f" | {attrs}" if attrs else "")).strip()
        table.add_row(Text(v.get("name", e["key"])), Text(v.get("type") or "?"), Text(known))
    return table


def _relations_text(relations: list[dict[str, Any]]) -> RenderableType:
    if not relations:
        return Text("No relations yet.", style="dim")
    lines = [
        f"{r['value']['source']} —{r['value']['relation']}→ {r['value']['target']}  ({(r['valid_from'] or '')[:10]})" for r in relations
    ]
    return Text(f"Relations ({len(relations)})\n" + "\n".join(lines))


def _notes_text(notes: list[dict[str, Any]]) -> RenderableType:
    if not notes:
        return Text("No summary notes for this thread yet.", style="dim")
    lines = [f"[{str(n.get('at', ''))[:10]}] {n.get('text', '')}" for n in sorted(notes, key=lambda n: str(n.get("at", "")))]
    return Text(f"Summary notes ({len(notes)})\n" + "\n".join(lines))


def state_view(state: dict[str, Any]) -> RenderableType:
    if not state:
        return Text("No state yet: the model keeps it when the memory stack has the state layer.", style="dim")
    return Panel(JSON.from_data(state, ensure_ascii=False), title="state", title_align="left")


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
