"""Benchmark: the write side's extraction call under other decoding options of the local model.

Three real extraction prompts (the first sessions of three LifeAssist-CN users, as the extractor
builds them), decoded at temperature 0 as the extractor asks, and again with one option changed:

- ``ngram``: llama.cpp's prompt-lookup speculative decoding (``ngram_simple``, 3-token keys,
  16-token drafts), in a model process of its own;
- ``compact``: the same JSON schema forced to compact JSON through llguidance
  (``whitespace_flexible: false``), sent as a raw grammar.

Prints prompt and completion tokens, seconds and the answer of each call, so a faster option that
changes the answer shows it.

    python bench/decode_options.py ngram --data ../shared/data/lifeassist_cn/lifeassist_cn_dev.json
    python bench/decode_options.py compact --data ../shared/data/lifeassist_cn/lifeassist_cn_dev.json
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime

from memstack.llm import extract as ex
from memstack.llm import local
from memstack.llm.structured import json_schema_for
from memstack.types import Message

USERS = (("邵婉清", 0), ("贺晓岚", 1), ("柯雨萱", 2))
PARTS = ("facts", "entities", "relations")


def prompts(path: str) -> list[list[dict[str, str]]]:
    with open(path, encoding="utf-8") as f:
        histories = json.load(f)["histories"]
    out = []
    for name, n in USERS:
        day = sorted(histories[name])[n]
        at = datetime.fromisoformat(day + "T10:00:00+00:00")
        turns = [
            Message(role=role, content=t[key], timestamp=at)
            for t in histories[name][day]
            for role, key in (("user", "query"), ("assistant", "response"))
        ]
        out.append(ex.prompt(turns, PARTS, "zh"))
    return out


def ngram_model() -> local.LocalModel:
    """A local model whose server decodes with prompt-lookup drafts."""
    import xllamacpp

    class Ngram(local.LocalModel):
        def _start(self):  # noqa: ANN202  (the parent's)
            made = xllamacpp.CommonParams

            def params():  # noqa: ANN202
                p = made()
                p.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
                p.speculative.ngram_simple.size_n, p.speculative.ngram_simple.size_m = 3, 16
                return p

            xllamacpp.CommonParams = params
            try:
                return super()._start()
            finally:
                xllamacpp.CommonParams = made

    return Ngram()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("option", choices=("ngram", "compact"))
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    schema = json_schema_for(ex.schema_for(PARTS))
    plain = local.LocalModel()
    other = ngram_model() if args.option == "ngram" else plain
    compact = "%llguidance {}\nstart: %json " + json.dumps(
        {**schema, "x-guidance": {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}}, ensure_ascii=False
    )
    for conversation in prompts(args.data):
        for label, model in (("as shipped", plain), (args.option, other)):
            started = time.perf_counter()
            if label == "compact":
                answer = model._loaded().handle_chat_completions(
                    {"messages": conversation, "temperature": 0, "seed": 0, "max_tokens": 400, "grammar": compact}
                )
                usage, text = answer["usage"], answer["choices"][0]["message"]["content"]
                tokens = (usage["prompt_tokens"], usage["completion_tokens"])
            else:
                c = model.complete(conversation, schema=schema, temperature=0, max_tokens=400)
                tokens, text = (c.prompt_tokens, c.completion_tokens), c.text
            print(f"{label}: {tokens[0]} prompt + {tokens[1]} completion tokens, {time.perf_counter() - started:.1f} s")
            print(text, flush=True)


if __name__ == "__main__":
    main()
