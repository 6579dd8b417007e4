"""stagecraft.bench: rows like the CLI's bench.json, interleaved timing, DataFrames."""

from __future__ import annotations

import pytest

import stagecraft

KEYS = {"network", "batch", "dtype", "schedule", "stages", "median_ms", "p10_ms", "p90_ms",
        "images_per_s", "speedup", "predicted_ms", "search_s", "measured", "cache_hits",
        "backend", "device"}


def test_bench_rows(squeezenet):
    found = stagecraft.schedule(squeezenet, "dp", cost_model="analytic:v100", progress=False)
    rounds = []
    rows = stagecraft.bench(squeezenet, ["sequential", "greedy", found], iters=7, warmup=1,
                            progress=lambda p, d, t, s, x: rounds.append((p, d, t)))
    assert [r["schedule"] for r in rows] == ["sequential", "greedy", "dp-both"]
    for r in rows:
        assert set(r) == KEYS
        assert 0 < r["p10_ms"] <= r["median_ms"] <= r["p90_ms"]
        assert r["images_per_s"] == pytest.approx(1e3 / r["median_ms"])
        assert r["network"] == "squeezenet1_1" and r["backend"] == "cpu"
    assert rows[0]["speedup"] == 1.0
    assert rows[1]["speedup"] == pytest.approx(rows[0]["median_ms"] / rows[1]["median_ms"])
    assert rows[0]["stages"] == squeezenet.num_ops
    assert rows[2]["stages"] == len(found)
    # Progress after each block of timed runs (5 of each schedule, then the other 2).
    assert [(d, t) for p, d, t in rounds if p == "bench"] == [(5, 7), (7, 7)]


def test_bench_labels_and_several_models():
    rows = stagecraft.bench(["squeezenet1_1", "squeezenet1_0"], {"seq": "sequential"}, iters=2,
                            warmup=0, input_size=64, progress=False)
    assert [(r["network"], r["schedule"]) for r in rows] == [("squeezenet1_1", "seq"),
                                                            ("squeezenet1_0", "seq")]


def test_bench_as_frame(squeezenet):
    pandas = pytest.importorskip("pandas", reason="pandas is not installed (scripts/test.sh installs it)")
    df = stagecraft.bench(squeezenet, ["sequential", "greedy"], iters=2, warmup=0,
                          as_frame=True, progress=False)
    assert isinstance(df, pandas.DataFrame)
    assert list(df["schedule"]) == ["sequential", "greedy"]
    assert set(df.columns) == KEYS
