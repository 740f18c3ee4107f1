"""The dashboard's charts as geometry for inline SVG (no script, no library): pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: CSS classes c0..c7 colour the parts of a chart (ui.css)
PALETTE = 8


def day_bars(days: Sequence[dict[str, Any]], *, width: int = 760, height: int = 220) -> dict[str, Any]:
    """Stacked bars of prompt and completion tokens per day: ``{"bars", "ticks", "width", "height"}``
    in SVG user units, a bar per day in order (the axis leaves 48 units on the left, 28 below)."""
    left, bottom, top = 48, 28, 10
    plot_w, plot_h = width - left - 8, height - bottom - top
    top_value = max((d["prompt_tokens"] + d["completion_tokens"] for d in days), default=0)
    scale = _nice(top_value)
    slot = plot_w / max(1, len(days))
    bar_w = max(2.0, min(48.0, slot * 0.7))
    bars = []
    for i, d in enumerate(days):
        x = left + i * slot + (slot - bar_w) / 2
        p_h = plot_h * d["prompt_tokens"] / scale if scale else 0
        c_h = plot_h * d["completion_tokens"] / scale if scale else 0
        base = top + plot_h
        bars.append(
            {
                "day": d["day"],
                "x": round(x, 1),
                "w": round(bar_w, 1),
                "prompt": {"y": round(base - p_h, 1), "h": round(p_h, 1)},
                "completion": {"y": round(base - p_h - c_h, 1), "h": round(c_h, 1)},
                "label": d["day"][5:],
                "label_x": round(x + bar_w / 2, 1),
                "show_label": len(days) <= 14 or i % max(1, len(days) // 10) == 0,
                "tokens": d["prompt_tokens"] + d["completion_tokens"],
                "calls": d["calls"],
            }
        )
    ticks = [{"y": round(top + plot_h - plot_h * f, 1), "value": int(scale * f)} for f in (0, 0.5, 1)] if scale else []
    return {"bars": bars, "ticks": ticks, "width": width, "height": height, "left": left, "base": top + plot_h, "right": width - 8}


def _nice(value: float) -> float:
    """The axis maximum: 1, 2 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 0
    step = 1.0
    while step * 10 <= value:
        step *= 10
    return next(step * m for m in (1, 2, 5, 10) if step * m >= value)


def token_bar(parts: Sequence[tuple[str, int]], *, width: int = 1000) -> list[dict[str, Any]]:
    """One horizontal bar split by the tokens of each part (parts with none left out): ``[{"name",
    "tokens", "x", "w", "css", "share"}]`` in units of ``width``."""
    shown = [(n, t) for n, t in parts if t > 0]
    total = sum(t for _, t in shown)
    out, x = [], 0.0
    for i, (name, tokens) in enumerate(shown):
        w = width * tokens / total
        out.append(
            {
                "name": name,
                "tokens": tokens,
                "x": round(x, 2),
                "w": round(w, 2),
                "css": f"c{i % PALETTE}",
                "share": round(100 * tokens / total),
            }
        )
        x += w
    return out
