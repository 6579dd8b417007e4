"""stagecraft.schedule and Schedule: stages, settings, YAML round trips, reports."""

from __future__ import annotations

import pytest

import stagecraft


@pytest.fixture(scope="module")
def inception():
    return stagecraft.Model("inception_v3", input_size=75)


@pytest.fixture(scope="module")
def dp(inception):
    return stagecraft.schedule(inception, "dp", cost_model="analytic:v100", progress=False)


def test_stages_cover_every_op_once(inception, dp):
    ops = [op for st in dp.stages for op in st.ops]
    assert len(ops) == inception.num_ops == len(set(ops))
    assert {st.kind for st in dp.stages} <= {"merge", "concurrent"}
    assert [st.number for st in dp.stages] == list(range(1, len(dp) + 1))
    assert dp.predicted_ms == pytest.approx(sum(st.predicted_ms for st in dp.stages), rel=1e-6)
    assert dp.strategy == "dp"
    m = dp.meta
    assert (m["network"], m["batch"], m["dtype"], m["r"], m["s"]) == ("inception_v3", 1, "f32", 3, 8)
    assert dp.stats["transitions"] > 0 and dp.stats["blocks"] > 1


def test_dp_beats_sequential_in_its_own_model(inception, dp):
    seq = stagecraft.schedule(inception, "sequential", cost_model="analytic:v100", progress=False)
    assert len(seq) == inception.num_ops
    assert all(len(st.ops) == 1 for st in seq.stages)
    assert dp.predicted_ms < seq.predicted_ms


def test_search_settings_are_honoured(inception):
    merge = stagecraft.schedule(inception, "dp", mode="merge", cost_model="analytic:v100",
                                progress=False)
    assert all(st.kind == "merge" or len(st.groups) == 1 for st in merge.stages)
    assert any(st.kind == "merge" for st in merge.stages)
    conc = stagecraft.schedule(inception, "dp", mode="concurrent", r=1, s=2,
                               cost_model="analytic:v100", progress=False)
    assert all(st.kind == "concurrent" for st in conc.stages)
    assert all(len(g) == 1 for st in conc.stages for g in st.groups)
    assert all(len(st.groups) <= 2 for st in conc.stages)
    assert any(len(st.groups) == 2 for st in conc.stages)
    assert (conc.meta["mode"], conc.meta["r"], conc.meta["s"]) == ("concurrent", 1, 2)


def test_yaml_round_trip(tmp_path, inception, dp):
    path = tmp_path / "s.yaml"
    text = dp.to_yaml(path)
    assert path.read_text() == text
    for loaded in (stagecraft.Schedule.from_yaml(path, inception),
                   stagecraft.Schedule.from_yaml(path, input_size=75),  # network named by the file
                   stagecraft.Schedule.from_yaml_text(text, inception)):
        assert [st.groups for st in loaded.stages] == [st.groups for st in dp.stages]
        assert [st.kind for st in loaded.stages] == [st.kind for st in dp.stages]
        assert loaded.predicted_ms == pytest.approx(dp.predicted_ms, rel=1e-5)
        assert loaded.meta["graph_hash"] == inception.hash
        assert loaded.to_yaml() == text


def test_summary_and_html(dp):
    text = dp.summary()
    assert text.startswith("inception_v3 (batch 1, f32), analytic:v100: dp both r=3 s=8")
    rows = [l for l in text.splitlines() if l.strip()[:1].isdigit()]
    assert len(rows) == len(dp)
    html = dp._repr_html_()
    assert html.count("<tr><td>") == len(dp)
    assert "merge [" in html and "predicted" in html
    assert repr(dp).startswith("<stagecraft.Schedule inception_v3 dp")


def test_measured_on_cpu_records_device_and_layout(tmp_path):
    s = stagecraft.schedule("squeezenet1_1", "greedy", input_size=64, backend="cpu",
                            layout="nhwc", cache_dir=tmp_path, progress=False)
    assert s.meta["cost_model"].startswith("measured")
    assert s.meta["layout"] == "nhwc"
    assert s.meta["device"].startswith("cpu")
    assert all(st.predicted_ms > 0 for st in s.stages)
    assert s.stats["measured"] > 0
    assert list(tmp_path.iterdir()), "the profile cache was saved"
