"""`python -m prunex.bench.loader` makes its two ways in an order that turns each run (not timings: the order)."""

from __future__ import annotations

import pytest
import torch

from prunex.bench import loader as bench


@pytest.mark.parametrize("runs", [4, 5])
def test_the_loader_bench_turns_the_order_of_its_ways_each_run(monkeypatch: pytest.MonkeyPatch, runs: int) -> None:
    made: list[tuple[int, str]] = []  # (seed = run, way) in the order the bench makes them
    way = {False: "image by image", True: "tensor ops"}  # `_make_batch`'s `batched`

    def record(dataset: object, indices: list[int], batched: bool, seed: int) -> tuple[float, list]:
        made.append((seed, way[batched]))
        return 0.001, [(torch.zeros(1), i) for i in indices]

    monkeypatch.setattr(bench, "_make_batch", record)
    times = bench.measure(list(range(10)), batch=3, runs=runs)
    assert {name: len(ms) for name, ms in times.items()} == {"image by image": runs, "tensor ops": runs}
    per_run = [[w for s, w in made if s == r] for r in range(runs)]
    assert [s for s, _ in made] == sorted(s for s, _ in made)  # one run after the other, both ways in each
    assert all(sorted(ways) == sorted(way.values()) for ways in per_run)
    firsts = [ways[0] for ways in per_run]
    assert firsts == ["image by image", "tensor ops"] * (runs // 2) + ["image by image"] * (runs % 2)
    assert abs(firsts.count("image by image") - firsts.count("tensor ops")) <= 1
