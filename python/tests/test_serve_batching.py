"""How a served batch runs over the planned batch sizes (stagecraft.ray_serve.batch_runs): the
cover of least measured cost, and its runs give the samples' outputs in order."""
import numpy as np
import pytest

import stagecraft
from stagecraft.ray_serve import _run_costs, _run_pieces, batch_runs

LINEAR = {1: 70.0, 2: 137.0, 4: 270.0}  # about resnet50 on one thread (Zen 4): batching gains little


def test_linear_costs_split_instead_of_padding():
    assert batch_runs(LINEAR, 1) == [1]
    assert batch_runs(LINEAR, 2) == [2]
    assert batch_runs(LINEAR, 3) == [2, 1]  # 207 ms, where padding to 4 takes 270
    assert batch_runs(LINEAR, 4) == [4]


def test_cheap_large_batches_pad():
    costs = {1: 70.0, 2: 100.0, 4: 120.0}
    assert batch_runs(costs, 3) == [4]
    assert batch_runs(costs, 2) == [2]
    # 7 samples with plans of up to 4: two runs of 4, the second padded.
    assert batch_runs(costs, 7) == [4, 4]


def test_every_cover_holds_its_samples_at_least_cost():
    rng = np.random.default_rng(3)
    for _ in range(200):
        sizes = sorted(set(rng.integers(1, 9, size=rng.integers(1, 4)).tolist()))
        costs = {s: float(rng.uniform(1, 10) * s ** rng.uniform(0.3, 1.2)) for s in sizes}
        n = int(rng.integers(1, 13))
        runs = batch_runs(costs, n)
        assert sum(runs) >= n and sum(runs) - runs[-1] < n, (costs, n, runs)  # only the last pads
        # No cover is cheaper (brute force over multisets of up to n runs).
        best = min(_brute(costs, n))
        assert sum(costs[s] for s in runs) == pytest.approx(best), (costs, n, runs)


def _brute(costs, n):
    sizes = sorted(costs)
    stack = [(0, 0.0, 0)]
    while stack:
        held, cost, lo = stack.pop()
        if held >= n:
            yield cost
            continue
        for i in range(lo, len(sizes)):
            stack.append((held + sizes[i], cost + costs[sizes[i]], i))


def test_bad_requests_are_refused():
    with pytest.raises(ValueError, match="0 samples"):
        batch_runs(LINEAR, 0)
    with pytest.raises(ValueError, match="planned sizes"):
        batch_runs({}, 2)


def test_pieces_give_each_sample_its_own_outputs():
    """Samples run as [2, 1] and as [4] (padded) give the outputs a batch of 3 gives, in order."""
    sessions = {b: stagecraft.Session("squeezenet1_1", batch=b, input_size=48, schedule="sequential",
                                      progress=False) for b in (1, 2, 3, 4)}
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 3, 48, 48)).astype(np.float32)
    (want,) = sessions[3].run([x])
    for runs in ([2, 1], [4], [1, 1, 1], [1, 2]):
        (got,) = _run_pieces(sessions, runs, [x])
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(runs))
    costs = _run_costs({b: sessions[b] for b in (1, 2, 4)}, [("x", (3, 48, 48))], rounds=2)
    assert sorted(costs) == [1, 2, 4] and all(np.isfinite(v) and v > 0 for v in costs.values())
