"""Benchmark: `memstack bench recall` with search settings changed, on the same stored index.

Every search setting (``memstack.retrieval.search.SearchSettings``) is a measured default; this
runs the recall benchmark with some of them replaced, so a sweep is one command per value on a
store indexed once (``--reuse FILE``: only the queries run again). Weights are set by name.

    python bench/search_settings.py relative_cut=0.2 -- --dataset longmemeval \\
        --data ../shared/data/longmemeval/longmemeval_s_dev.json.gz --method default --k 1,5,10,20 --reuse FILE
    python bench/search_settings.py weights.period=3,feedback=5 -- --dataset locomo --data ... --reuse FILE
"""

from __future__ import annotations

import dataclasses
import sys

from memstack.cli import main
from memstack.retrieval import search


def settings_from(spec: str) -> dict[str, object]:
    """``name=value,...`` as SearchSettings fields (each value in its field's type; ``weights.NAME``
    sets one fusion weight)."""
    default = search.SearchSettings()
    weights = dict(default.weights)
    out: dict[str, object] = {}
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        if name.startswith("weights."):
            weights[name.removeprefix("weights.")] = float(value)
            out["weights"] = tuple(weights.items())
        elif name in {f.name for f in dataclasses.fields(default)}:
            kind = type(getattr(default, name))
            if value.lower() == "none":  # an optional setting turned off (cross_margin=none)
                out[name] = None
            else:
                out[name] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
        else:
            raise SystemExit(f"no search setting {name!r}; known: {', '.join(f.name for f in dataclasses.fields(default))}")
    return out


def run(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") != 1:
        raise SystemExit(__doc__)
    changes = settings_from(argv[0])
    made = search.Searcher.__init__

    def with_changes(self, units, vectors, embedder, settings=None):  # noqa: ANN001  (Searcher's own signature)
        made(self, units, vectors, embedder, dataclasses.replace(settings or search.SearchSettings(), **changes))

    search.Searcher.__init__ = with_changes  # every searcher of this process, the benchmark's among them
    return main(["bench", "recall", *argv[2:]])


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
