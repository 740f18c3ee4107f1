"""Benchmark: latency of the default (hybrid) recall query with one big user among many.

Fills a fresh memstack store with ``--total`` units, ``--per-user`` of them for one user: short
texts made of real Chinese and English words (so BM25 sees realistic term statistics) and
synthetic unit vectors with topic structure (the embedder's dimension). Then it runs ``--queries``
searches for the big user through ``Searcher.search`` with the shipped settings: the query is
embedded by the real local model, BM25 and vector candidates are fused, units hydrated. Reports
p50/p95 of the whole query and of the query embedding alone.

    python bench/hybrid_latency.py --total 1000000 --per-user 100000
    python bench/hybrid_latency.py --total 300000 --per-user 100000 --pg-dsn postgresql://postgres@127.0.0.1:5433/postgres
    python bench/hybrid_latency.py --only postgres --keep --pg-dsn ...   # keep the loaded schema; a rerun only queries
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memstack.backends import open_store  # noqa: E402
from memstack.providers.embeddings import get_embedder  # noqa: E402
from memstack.retrieval.search import Searcher  # noqa: E402
from memstack.types import Scope, Unit  # noqa: E402

ZH = [
    "跑步",
    "火锅",
    "知识中台",
    "后端",
    "技术",
    "缓存",
    "检索",
    "预算",
    "上线",
    "汇报",
    "提纲",
    "电影",
    "科幻",
    "小说",
    "旅游",
    "厦门",
    "北京",
    "上海",
    "公园",
    "散步",
    "樱花",
    "松鼠",
    "钢琴",
    "绘画",
    "品茶",
    "摄影",
    "风景",
    "海滩",
    "山脉",
    "湖泊",
    "健身",
    "教练",
    "游泳",
    "潜水",
    "滑雪",
    "登山",
    "攀岩",
    "菜谱",
    "川菜",
    "粤菜",
    "寿司",
    "烤肉",
    "礼物",
    "生日",
    "朋友",
    "同事",
    "老板",
    "项目",
    "进度",
    "会议",
    "周末",
    "假期",
    "天气",
    "下雨",
    "猫",
    "狗",
    "医生",
    "感冒",
    "咖啡",
    "早餐",
    "地铁",
    "自行车",
    "手机",
    "电脑",
    "键盘",
    "书店",
    "图书馆",
    "考试",
    "论文",
    "数据库",
    "服务器",
    "接口",
    "部署",
    "测试",
    "用户",
    "需求",
    "设计",
    "文档",
    "版本",
    "发布",
]
EN = [
    "running",
    "hotpot",
    "platform",
    "backend",
    "cache",
    "search",
    "budget",
    "launch",
    "report",
    "outline",
    "movie",
    "novel",
    "travel",
    "park",
    "walk",
    "cherry",
    "squirrel",
    "piano",
    "painting",
    "tea",
    "photography",
    "beach",
    "mountain",
    "lake",
    "gym",
    "coach",
    "swimming",
    "diving",
    "skiing",
    "hiking",
    "climbing",
    "recipe",
    "sushi",
    "barbecue",
    "gift",
    "birthday",
    "friend",
    "colleague",
    "manager",
    "project",
    "progress",
    "meeting",
    "weekend",
    "holiday",
    "weather",
    "rain",
    "cat",
    "dog",
    "doctor",
    "cold",
    "coffee",
    "breakfast",
    "subway",
    "bicycle",
    "phone",
    "laptop",
    "keyboard",
    "bookstore",
    "library",
    "exam",
    "paper",
    "database",
    "server",
    "api",
    "deploy",
    "test",
    "user",
    "requirement",
    "design",
    "document",
    "version",
    "release",
]
END = datetime(2026, 1, 1, tzinfo=timezone.utc)


def text_for(rng: random.Random) -> str:
    words = rng.sample(ZH, rng.randint(3, 7)) if rng.random() < 0.5 else rng.sample(EN, rng.randint(4, 9))
    joiner = "，" if words[0] in ZH else " "
    return ("用户: 我" if joiner == "，" else "User: I ") + joiner.join(words)


def generate(store, *, total: int, per_user: int, dim: int, model: str, batch: int = 5000, seed: int = 7) -> float:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    centers = nrng.standard_normal((64, dim)).astype(np.float32)
    t0 = time.perf_counter()
    big = set(rng.sample(range(total), per_user))
    done = other = 0
    while done < total:
        units = []
        for _ in range(min(batch, total - done)):
            i = done + len(units)
            if i in big:
                user = "user_big"
            else:
                other += 1
                user = f"user_{other // 500:06d}"
            units.append(
                Unit(
                    id=f"u{i}", scope=Scope(user_id=user, thread_id=f"t{i % 97}"), text=text_for(rng), timestamp=END - timedelta(minutes=i)
                )
            )
        vecs = centers[nrng.integers(0, 64, len(units))] + 0.6 * nrng.standard_normal((len(units), dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        store.units.put(units)
        store.vectors.upsert(units, vecs, model=model)
        done += len(units)
        print(f"\r{done}/{total} units", end="", file=sys.stderr)
    print(file=sys.stderr)
    return time.perf_counter() - t0


def measure(store, embedder, queries: list[str], n: int) -> dict:
    searcher = Searcher(store.units, store.vectors, embedder)
    user = Scope(user_id="user_big")
    for q in queries[:10]:
        searcher.search(user, q, k=10, at=END)
    total, embed = [], []
    for i in range(n):
        q = queries[i % len(queries)]
        t = time.perf_counter()
        embedder.embed_query(q)
        embed.append(time.perf_counter() - t)
        t = time.perf_counter()
        searcher.search(user, q, k=10, at=END)
        total.append(time.perf_counter() - t)

    def pct(values, p):
        ordered = sorted(values)
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 2)

    return {
        "query_p50_ms": round(statistics.median(total) * 1000, 2),
        "query_p95_ms": pct(total, 0.95),
        "embed_p50_ms": round(statistics.median(embed) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--per-user", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pg-dsn")
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL bench schema, and reuse it when it holds --total units")
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder = get_embedder()
    rng = random.Random(3)
    queries = [
        ("我上次说的" + "和".join(rng.sample(ZH, 2)) + "是什么？")
        if i % 2
        else ("What did I say about " + " and ".join(rng.sample(EN, 2)) + "?")
        for i in range(50)
    ]
    results = {"total": args.total, "per_user": args.per_user, "queries": args.queries}
    with tempfile.TemporaryDirectory() as tmp:
        targets = [] if args.only == "postgres" else [("sqlite", lambda: open_store(f"sqlite:///{tmp}/bench.db"))]
        if args.pg_dsn and args.only != "sqlite":
            from memstack.backends.postgres import PostgresStore

            targets.append(("postgres", lambda: PostgresStore(args.pg_dsn, schema="memstack_bench_hybrid")))
        for name, opener in targets:
            store = opener()
            try:
                reuse = args.keep and name == "postgres" and store.vectors.info()[2] == args.total
                load = (
                    None
                    if reuse
                    else generate(store, total=args.total, per_user=args.per_user, dim=embedder.dimension, model=embedder.name)
                )
                results[name] = {
                    "load_seconds": None if load is None else round(load, 1),
                    **measure(store, embedder, queries, args.queries),
                }
            finally:
                if name == "postgres" and not args.keep:
                    with store._db.transaction("dropping the bench schema") as cur:
                        cur.execute("DROP SCHEMA memstack_bench_hybrid CASCADE")
                store.close()
    print(json.dumps(results) if args.json else json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
