"""Projections onto structured sparsity sets (sec. 2.1, eq. (10)), group masks and constrained layers."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torchvision
from torch import nn

from prunex.pruning import (
    GroupMask,
    LayerSparsity,
    channel_mask,
    constrained_layers,
    filter_mask,
    keep_count,
    masked,
    project,
    project_groups,
    shape_mask,
    support_mask,
)

# --------------------------------------------------------------------------- brute force reference


def _group_element_mask(shape: tuple[int, ...], kind: str, groups: tuple[int, ...]) -> torch.Tensor:
    """Element mask keeping the listed groups of one kind, built without the library."""
    m = torch.zeros(shape, dtype=torch.bool)
    idx = list(groups)
    if kind == "filter":
        m[idx] = True
    elif kind == "channel":
        m[:, idx] = True
    else:  # shape: flat (c, h, w) positions across all filters
        m.view(shape[0], -1)[:, idx] = True
    return m


def _n_groups(shape: tuple[int, ...], kind: str) -> int:
    return {"filter": shape[0], "channel": shape[1], "shape": math.prod(shape[1:])}[kind]


def _brute_force_nearest(w: torch.Tensor, kind: str, k: int) -> torch.Tensor:
    """Nearest point of {W : at most k nonzero groups} by enumerating every group subset of size <= k.

    The nearest point supported on a fixed subset G is w restricted to G, so the minimum over all
    subsets of the allowed sizes is the Euclidean projection.
    """
    n = _n_groups(tuple(w.shape), kind)
    best, best_dist = None, math.inf
    for size in range(k + 1):
        for groups in itertools.combinations(range(n), size):
            cand = w * _group_element_mask(tuple(w.shape), kind, groups)
            dist = torch.linalg.vector_norm(w - cand).item()
            if dist < best_dist:
                best, best_dist = cand, dist
    return best


KIND_KW = {"filter": "filter_keep", "channel": "channel_keep", "shape": "shape_keep"}


@pytest.mark.parametrize("kind", ["filter", "channel", "shape"])
@pytest.mark.parametrize("keep", [0.2, 0.25, 1 / 3, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_project_is_the_euclidean_projection(kind: str, keep: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(4, 3, 2, 2, generator=gen, dtype=torch.float64)
    k = keep_count(_n_groups(tuple(w.shape), kind), keep)
    ref = _brute_force_nearest(w, kind, k)
    got = project(w, **{KIND_KW[kind]: keep})
    assert torch.equal(got != 0, ref != 0)
    assert torch.allclose(got, ref, rtol=0, atol=0)
    # exactly k groups survive (random data has no zero groups)
    kind_mask = {"filter": filter_mask, "channel": channel_mask, "shape": shape_mask}[kind](w, keep)
    assert torch.equal(got != 0, kind_mask)


@pytest.mark.parametrize("kind", ["filter", "channel"])
@pytest.mark.parametrize("keep", [0.25, 0.5, 0.8])
def test_project_2d_is_the_euclidean_projection(kind: str, keep: float) -> None:
    w = torch.randn(5, 4, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    ref = _brute_force_nearest(w, kind, keep_count(_n_groups(tuple(w.shape), kind), keep))
    got = project(w, **{KIND_KW[kind]: keep})
    assert torch.equal(got, ref)


def test_2d_groups_are_rows_and_columns() -> None:
    w = torch.tensor([[1.0, 0.0, 5.0], [0.0, 0.1, 0.0], [2.0, 0.0, 0.0]])
    assert torch.equal(filter_mask(w, 1 / 3), torch.tensor([[True] * 3, [False] * 3, [False] * 3]))
    assert torch.equal(channel_mask(w, 1 / 3), torch.tensor([[False, False, True]] * 3))
    with pytest.raises(ValueError, match="4-D"):
        project(w, shape_keep=0.5)
    with pytest.raises(ValueError, match="4-D"):
        shape_mask(w, 1.0)
    with pytest.raises(ValueError, match=">= 2 dims"):
        filter_mask(torch.ones(3), 0.5)


def test_keep_one_is_identity_and_result_is_new_tensor() -> None:
    w = torch.randn(3, 2, 3, 3)
    assert torch.equal(support_mask(w), torch.ones_like(w, dtype=torch.bool))
    out = project(w)
    assert torch.equal(out, w) and out.data_ptr() != w.data_ptr()
    assert project(w, filter_keep=0.5).dtype == w.dtype


def test_projection_is_idempotent_and_zeroes_non_finite_pruned_entries() -> None:
    w = torch.randn(6, 5, 3, 3, generator=torch.Generator().manual_seed(3))
    p = project(w, filter_keep=0.5, channel_keep=0.4, shape_keep=0.7)
    assert torch.equal(project(p, filter_keep=0.5, channel_keep=0.4, shape_keep=0.7), p)
    # two infinite filters tie (lower index kept); the pruned -inf becomes 0, not NaN (-inf * 0)
    w2 = torch.tensor([math.inf, -math.inf]).view(2, 1, 1, 1)
    assert torch.equal(project(w2, filter_keep=0.5), torch.tensor([math.inf, 0.0]).view(2, 1, 1, 1))


# --------------------------------------------------------------------------- composite sets


@pytest.mark.parametrize(
    "keeps",
    [
        {"filter_keep": 0.5, "channel_keep": 0.5},
        {"channel_keep": 0.5, "shape_keep": 0.4},
        {"filter_keep": 0.3, "channel_keep": 0.7, "shape_keep": 0.5},
    ],
)
def test_composite_support_is_intersection_of_single_supports(keeps: dict[str, float]) -> None:
    w = torch.randn(8, 6, 3, 3, generator=torch.Generator().manual_seed(11))
    single = [project(w, **{kw: v}) != 0 for kw, v in keeps.items()]
    expected = single[0]
    for s in single[1:]:
        expected = expected & s
    assert torch.equal(support_mask(w, **keeps), expected)
    assert torch.equal(project(w, **keeps) != 0, expected)
    assert torch.equal(project(w, **keeps), torch.where(expected, w, torch.zeros(())))


# Hand-made 2 x 2 (x 1 x 1) counter-example to the order-independence claim of sec. 3.2:
#   W = [[1.0, 3.0], [2.6, 2.4]]; row norms^2 = 10, 12.52; column norms^2 = 7.76, 14.76.
# filter -> channel keeps row 1, then of row 1 the larger entry 2.6: support {(1, 0)}.
# channel -> filter keeps column 1, then of column 1 the larger entry 3.0: support {(0, 1)}.
# Intersecting masks of the same W keeps row 1 and column 1: support {(1, 1)}.
COUNTER = torch.tensor([[1.0, 3.0], [2.6, 2.4]], dtype=torch.float64).view(2, 2, 1, 1)


def _support(*entries: tuple[int, int]) -> torch.Tensor:
    m = torch.zeros(2, 2, 1, 1, dtype=torch.bool)
    for o, c in entries:
        m[o, c] = True
    return m


def test_sequential_projection_order_changes_support() -> None:
    f_then_c = project(project(COUNTER, filter_keep=0.5), channel_keep=0.5)
    c_then_f = project(project(COUNTER, channel_keep=0.5), filter_keep=0.5)
    assert torch.equal(f_then_c != 0, _support((1, 0)))
    assert torch.equal(c_then_f != 0, _support((0, 1)))
    assert not torch.equal(f_then_c != 0, c_then_f != 0)


def test_support_mask_is_order_independent_intersection() -> None:
    expected = _support((1, 1))
    assert torch.equal(support_mask(COUNTER, filter_keep=0.5, channel_keep=0.5), expected)
    # both orders of AND-ing masks computed from the same tensor agree, and agree with support_mask
    f, c = filter_mask(COUNTER, 0.5), channel_mask(COUNTER, 0.5)
    assert torch.equal(f & c, expected) and torch.equal(c & f, expected)
    # and the 180-degree-rotated tensor (filters and channels both reversed) gives the mirrored support
    rotated = COUNTER.flip(0, 1)
    assert torch.equal(support_mask(rotated, filter_keep=0.5, channel_keep=0.5), expected.flip(0, 1))


def test_intersection_is_feasible_but_not_nearest() -> None:
    p = project(COUNTER, filter_keep=0.5, channel_keep=0.5)
    gm = GroupMask.of_tensor(p)
    assert (gm.kept_out, gm.kept_in) == (1, 1)  # feasible: in S_f ∩ S_c
    # the exact projection onto S_f ∩ S_c (one filter, one channel) keeps the largest entry, 3.0 at (0, 1)
    exact = torch.zeros_like(COUNTER)
    exact[0, 1] = 3.0
    assert torch.linalg.vector_norm(COUNTER - p) > torch.linalg.vector_norm(COUNTER - exact)


# --------------------------------------------------------------------------- ties and keep counts


def test_ties_keep_lower_index() -> None:
    w = torch.ones(4, 2, 1, 1)
    assert torch.equal(filter_mask(w, 0.5)[:, 0, 0, 0], torch.tensor([True, True, False, False]))
    # exact top-k, not a threshold: all norms equal and still exactly 2 of 4 kept
    assert int(filter_mask(w, 0.5).count_nonzero()) == 2 * 2
    w = torch.tensor([1.0, -2.0, 2.0, 1.0]).view(4, 1, 1, 1)  # |-2| ties 2: index 1 wins
    assert torch.equal(filter_mask(w, 0.25).flatten(), torch.tensor([False, True, False, False]))
    w = torch.tensor([[3.0, 1.0, 1.0, 0.5]]).view(1, 4, 1, 1)
    assert torch.equal(channel_mask(w, 0.5).flatten(), torch.tensor([True, True, False, False]))
    w = torch.zeros(2, 1, 2, 2)
    w[:, 0, 1, 0] = 1.0
    w[:, 0, 0, 1] = 1.0  # positions (0,0,1) and (0,1,0) tie; flat index 1 < 2
    assert torch.equal(shape_mask(w, 0.25)[0, 0], torch.tensor([[False, True], [False, False]]))
    # deterministic across calls
    w = torch.ones(16, 16, 3, 3)
    assert torch.equal(
        support_mask(w, filter_keep=0.3, channel_keep=0.6, shape_keep=0.5),
        support_mask(w, filter_keep=0.3, channel_keep=0.6, shape_keep=0.5),
    )


@pytest.mark.parametrize(
    ("n", "keep", "expected"),
    [
        (64, 0.5, 32),
        (10, 0.7, 7),
        (3, 0.5, 2),
        (10, 0.01, 1),
        (5, 1.0, 5),
        (3, 1 / 3, 1),
        (100, 0.29, 29),
        (1, 0.5, 1),
        (7, 1, 7),
    ],
)
def test_keep_count(n: int, keep: float, expected: int) -> None:
    assert keep_count(n, keep) == expected


@pytest.mark.parametrize("keep", [0.0, -0.1, 1.0001, 2, math.nan, True])
def test_keep_count_rejects_keep_outside_unit_interval(keep: float) -> None:
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        keep_count(4, keep)
    with pytest.raises(ValueError):
        project(torch.ones(4, 4, 1, 1), channel_keep=keep)


def test_keep_count_rejects_no_groups() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        keep_count(0, 0.5)


# --------------------------------------------------------------------------- group masks


def test_group_mask_of_projected_tensor() -> None:
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(6, 5, 3, 3, generator=gen)
    p = project(w, filter_keep=0.5, channel_keep=0.6)  # 3 of 6 filters, 3 of 5 channels
    gm = GroupMask.of_tensor(p)
    f_norms = [w[o].norm().item() for o in range(6)]
    c_norms = [w[:, c].norm().item() for c in range(5)]
    top_f = sorted(sorted(range(6), key=lambda o: -f_norms[o])[:3])
    top_c = sorted(sorted(range(5), key=lambda c: -c_norms[c])[:3])
    assert gm.out_idx.tolist() == top_f and gm.in_idx.tolist() == top_c
    assert gm.out_idx.dtype == torch.long and gm.in_idx.dtype == torch.long
    assert (gm.kept_out, gm.kept_in, gm.total_out, gm.total_in) == (3, 3, 6, 5)
    assert gm.compact_shape == (3, 3, 3, 3)
    assert gm.density() == pytest.approx(9 / 30, rel=1e-6)
    assert torch.equal(gm.element_mask().expand_as(p), p != 0)
    assert torch.equal(gm.apply(w), p)  # applying the mask of a projection is the projection


@pytest.mark.parametrize("keeps", [(0.5, 1.0, 1.0), (1.0, 0.5, 1.0), (0.5, 0.6, 1.0), (0.7, 0.5, 0.4), (1.0, 1.0, 0.3)])
def test_project_groups_is_project_with_its_mask(keeps: tuple[float, float, float]) -> None:
    f, c, s = keeps
    w = torch.randn(8, 6, 3, 3, generator=torch.Generator().manual_seed(9))
    sp = LayerSparsity("w", f, c, s)
    p, gm = project_groups(w, sp)
    assert torch.equal(p, project(w, filter_keep=f, channel_keep=c, shape_keep=s))
    # the group mask's product support is exactly the projection's support, shape sparsity included
    support = support_mask(w, filter_keep=f, channel_keep=c, shape_keep=s)
    assert torch.equal(gm.element_mask().expand_as(w), support)
    assert torch.equal(gm.apply(w), p) and gm.with_shape == (s < 1.0)
    # the flag vector round-trips (what mask_sync ORs, eq. (14))
    back = GroupMask.from_vector(gm.vector(), gm.shape, gm.with_shape)
    assert back.drift(gm) == 0 and torch.equal(back.element_mask(), gm.element_mask())


def test_pruned_entries_are_exact_zeros_even_when_not_finite() -> None:
    w = torch.tensor([[1.0, -2.0], [float("nan"), float("-inf")], [-3.0, 0.5]])
    p, gm = project_groups(w, LayerSparsity("w", filter_keep=0.5))  # rows 0 and 2 have the larger norms
    assert gm.out_idx.tolist() == [0, 2]
    assert torch.equal(p, torch.tensor([[1.0, -2.0], [0.0, 0.0], [-3.0, 0.5]]))
    assert not torch.signbit(p[1]).any()  # +0.0, whatever the sign of what was pruned
    assert torch.equal(gm.apply(torch.full((3, 2), float("nan"))).isnan(), gm.element_mask().expand(3, 2))
    assert torch.equal(masked(torch.tensor([-1.0, 2.0]), torch.tensor([False, True])), torch.tensor([0.0, 2.0]))


def test_group_mask_of_shape_sparsity_uses_any() -> None:
    mask = torch.zeros(3, 4, 2, 2, dtype=torch.bool)
    mask[:, 1, 0, 1] = True  # one kernel position of channel 1 in every filter
    mask[2, 3, 1, 1] = True  # a single entry of filter 2, channel 3
    gm = GroupMask.from_support(mask, with_shape=True)
    assert gm.out_idx.tolist() == [0, 1, 2] and gm.in_idx.tolist() == [1, 3]
    # the support is the smallest product of groups containing the mask: 3 filters x 2 positions
    assert int(gm.element_mask().expand(3, 4, 2, 2).sum()) == 6 and gm.density() == 6 / 48
    assert GroupMask.from_support(mask).density() == 3 * 2 * 4 / 48  # without shape groups: whole kernels
    gm2 = GroupMask.from_support(torch.tensor([[False, True], [False, False], [True, False]]))
    assert gm2.out_idx.tolist() == [0, 2] and gm2.in_idx.tolist() == [0, 1]
    with pytest.raises(TypeError):
        GroupMask.from_support(mask.float())


def _gm(shape: tuple[int, ...], outs: list[int], ins: list[int]) -> GroupMask:
    m = torch.zeros(shape, dtype=torch.bool)
    m[torch.tensor(outs)[:, None], torch.tensor(ins)] = True
    return GroupMask.from_support(m)


def test_drift_counts_changed_groups() -> None:
    a = _gm((5, 4, 3, 3), [0, 1], [0, 2])
    assert a.drift(a) == 0
    assert a.drift(_gm((5, 4, 3, 3), [1, 3], [0, 2])) == 2  # filters 0 and 3
    assert a.drift(_gm((5, 4, 3, 3), [1, 3, 4], [1, 2, 3])) == 3 + 3
    assert _gm((5, 4, 3, 3), [1, 3, 4], [1, 2, 3]).drift(a) == 6
    with pytest.raises(ValueError, match="same layer"):
        a.drift(_gm((5, 3, 3, 3), [0], [0]))
    full = GroupMask.full((5, 4, 3, 3), torch.device("cpu"))
    assert full.drift(a) == 3 + 2 and full.density() == 1.0


# --------------------------------------------------------------------------- constrained layers


def _cifar_resnet18() -> nn.Module:
    with torch.device("meta"):
        model = torchvision.models.resnet18(num_classes=10)
        model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    return model


def test_constrained_layers_resnet18() -> None:
    model = _cifar_resnet18()
    convs = [f"{n}.weight" for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 20
    layers = constrained_layers(model, channel_keep=0.5)
    # the stem keeps its 3 RGB input channels, so with channel sparsity only it is unconstrained
    assert list(layers) == convs[1:]
    assert "fc.weight" not in layers and "layer2.0.downsample.0.weight" in layers
    assert all(s == LayerSparsity(n, channel_keep=0.5) for n, s in layers.items())

    both = constrained_layers(model, filter_keep=0.5, channel_keep=0.5)
    assert list(both) == convs
    assert both["conv1.weight"] == LayerSparsity("conv1.weight", filter_keep=0.5, channel_keep=1.0)
    assert both["layer1.0.conv1.weight"].channel_keep == 0.5

    assert constrained_layers(model) == {}


def test_constrained_layers_include_and_per_layer() -> None:
    model = _cifar_resnet18()
    layer4 = constrained_layers(model, channel_keep=0.5, include="layer4.*")
    assert list(layer4) == [
        "layer4.0.conv1.weight",
        "layer4.0.conv2.weight",
        "layer4.0.downsample.0.weight",
        "layer4.1.conv1.weight",
        "layer4.1.conv2.weight",
    ]
    assert constrained_layers(model, channel_keep=0.5, include="*.conv2.weight").keys() == {
        f"layer{i}.{j}.conv2.weight" for i in range(1, 5) for j in range(2)
    }
    fc = LayerSparsity("fc.weight", channel_keep=0.25)
    stem = LayerSparsity("conv1.weight", channel_keep=0.5, shape_keep=0.5)
    off = LayerSparsity("layer1.0.conv1.weight")
    layers = constrained_layers(
        model, channel_keep=0.5, per_layer={"fc.weight": fc, "conv1.weight": stem, off.name: off}
    )
    assert layers["fc.weight"] is fc and layers["conv1.weight"] is stem
    assert "layer1.0.conv1.weight" not in layers
    assert list(layers)[0] == "conv1.weight" and list(layers)[-1] == "fc.weight"  # module order

    with pytest.raises(ValueError, match="not a parameter"):
        constrained_layers(model, per_layer={"nope.weight": LayerSparsity("nope.weight", 0.5)})
    with pytest.raises(ValueError, match="named"):
        constrained_layers(model, per_layer={"fc.weight": LayerSparsity("conv1.weight", 0.5)})
    with pytest.raises(ValueError, match="4-D"):
        constrained_layers(model, per_layer={"fc.weight": LayerSparsity("fc.weight", shape_keep=0.5)})


@pytest.mark.parametrize("bad", [0.0, 1.5, -1.0, math.nan])
def test_layer_sparsity_validation(bad: float) -> None:
    with pytest.raises(ValueError, match=r"layer 'layer1.0.conv1.weight': channel_keep"):
        LayerSparsity("layer1.0.conv1.weight", channel_keep=bad)
    with pytest.raises(ValueError, match="filter_keep"):
        constrained_layers(_cifar_resnet18(), filter_keep=bad)
