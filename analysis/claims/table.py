"""The paper's claims as one table, in the report's order: each claim written with keyword arguments only,
naming the function that measures it in its topic's module (`analysis.claims.<topic>`).

Families of claims (one per model or method) are built from the paper's numbers in `prunex.paper`; what each
field means is `analysis.claims.base.Claim` and the package docstring."""

from __future__ import annotations

from functools import partial

from analysis.claims.base import FACTOR_TOLERANCE, NAN, PAPER_SETUP, QUALITATIVE, Claim
from analysis.claims.convergence import PAPER_DRIFT_WINDOW, drift_zero, residual_decay
from analysis.claims.latency import breakdown_share, latency_flat_worse, latency_median, latency_per_sync_ratio
from analysis.claims.model_sizes import IMAGENET_PARAM_COUNTS, param_count
from analysis.claims.pareto import (
    R152_DROP_POINTS,
    inference_speedup,
    pareto_accuracy,
    pareto_drop,
    pareto_shape,
    pareto_vs_ptf,
)
from analysis.claims.strong_scaling import scaling, scaling_ordering
from analysis.claims.time_to_accuracy import gb_to_peak, tta_minutes, tta_window_accuracy
from analysis.claims.volume import VOLUME_NAMES, compressed_fraction, dense_message, volume_reduction, volume_total
from prunex.paper import (
    FIG7_LATENCY_S,
    FIG7_PER_SYNC_X,
    FIG8_SHARE_PCT,
    FIG9_BASE_GPUS,
    FIG9_EFFICIENCY_PCT,
    FIG9_GPUS,
    FIG9_SPEEDUP,
    MODELS,
)


# -- volume ----------------------------------------------------------------------------------------
def _reduction(before: float, after: float) -> float:
    return round(100 * (1 - after / before), 1)


VOLUME: list[Claim] = [
    Claim(
        id="volume_reduction",
        source="abstract; sec. 5.3.1",
        text="PruneX sends ~60% less inter-node volume than dense DDP (mean over the models with both runs)",
        paper_value=60.0,
        unit="%",
        experiment="volume",
        measure=volume_reduction,
        tolerance=10.0,
        kind="abs",
        note="dimensionless; depends on the experiment's training budgets of both methods",
        tolerance_reason="the paper's three models give 59.9-60.1% (Fig. 6b); the reduction also depends on how "
        "many synchronisations each method makes in its budget, which the paper does not state: 10 points admit "
        "a different budget, not a different message",
    ),
    *[
        Claim(
            id=f"volume_{paper.tag}_{method}",
            source="Fig. 6b; sec. 5.3.1",
            text=f"{paper.label} total inter-node volume, {VOLUME_NAMES[method]}",
            paper_value=gb,
            unit="GB",
            experiment="volume",
            measure=volume_total,
            tolerance=0.15,
            kind="rel",
            method=method,
            model=model,
            needs=PAPER_SETUP,
            tolerance_reason="a total is messages x synchronisations and the paper does not state the number of "
            "synchronisations of its runs: 15% admits a somewhat different stopping point (convergence-based for "
            "PruneX), not a different message size",
        )
        for model, paper in MODELS.items()
        for method, gb in paper.volume_gb.items()
    ],
    *[
        Claim(
            id=f"volume_{paper.tag}_reduction",
            source="Fig. 6b; sec. 5.3.1",
            text=f"{paper.label}: PruneX's reduction of inter-node volume vs DDP",
            paper_value=_reduction(paper.volume_gb["ddp"], paper.volume_gb["hsadmm"]),
            unit="%",
            experiment="volume",
            measure=volume_reduction,
            tolerance=10.0,
            kind="abs",
            model=model,
            tolerance_reason="as volume_reduction: 10 points admit different training budgets of the two methods",
        )
        for model, paper in MODELS.items()
    ],
    Claim(
        id="message_r152_dense",
        source="Fig. 6a; sec. 5.3.1",
        text="ResNet-152 dense inter-node message per iteration ~220 MB",
        paper_value=220.0,
        unit="MB",
        experiment="volume",
        measure=dense_message,
        tolerance=0.10,
        kind="rel",
        model="resnet152",
        note="58.16M fp32 parameters are 232.6 MB = 221.8 MiB: the paper's ~220 MB is likely MiB",
        tolerance_reason="'~220 MB' is rounded and may be MiB (232.6 MB = 221.8 MiB, 5% apart): 10% covers both "
        "readings and nothing else (a bf16 message, half the size, is far outside)",
    ),
    Claim(
        id="message_r152_compressed",
        source="Fig. 6a; sec. 5.3.1",
        text="the compressed message stabilises at ~40% of the dense size (ResNet-152; other models when it is absent)",
        paper_value=40.0,
        unit="%",
        experiment="volume",
        measure=compressed_fraction,
        tolerance=10.0,
        kind="abs",
        model="resnet152",
        tolerance_reason="'~40%' is read off Fig. 6a's curve; at the same keep rates the fraction depends on how "
        "much the nodes' masks differ (their union is sent): 10 points admit that, not a different keep rate",
    ),
]


# -- latency ---------------------------------------------------------------------------------------
def _latency_claim(*, method: str, name: str, tolerance_reason: str) -> Claim:
    """Fig. 7's latency of `method` (`name` in the paper), compared only on the paper's set-up (V100s, 64 GPUs,
    CIFAR-10). Elsewhere it is not measurable: the ordering of the two latencies is no reading of "~0.10 s", and
    how far apart they are is `latency_per_sync_ratio`'s factor, judged once there (a fallback to "PruneX below
    DDP" here counted one ordering as two reproductions beside a factor half the paper's)."""
    seconds = FIG7_LATENCY_S[method]
    return Claim(
        id=f"latency_{name.lower()}",
        source="Fig. 7; sec. 5.3.2",
        text=f"{name} per-iteration communication latency ~{seconds:.2f} s",
        paper_value=seconds,
        unit="s",
        experiment="latency",
        measure=latency_median,
        tolerance=0.25,
        kind="rel",
        tolerance_reason=tolerance_reason,
        method=method,
        needs=(*PAPER_SETUP, "v100"),
    )


LATENCY: list[Claim] = [
    _latency_claim(
        method="ddp",
        name="DDP",
        tolerance_reason="'~0.50 s' is an approximate value read off Fig. 7; +-25% is the factor claims' band, "
        "this time being the numerator of the 5x factor",
    ),
    _latency_claim(
        method="hsadmm",
        name="PruneX",
        tolerance_reason="'~0.10 s' is read off Fig. 7; +-25% as latency_ddp, this time being the 5x's denominator",
    ),
    Claim(
        id="latency_per_sync_ratio",
        source="sec. 5.3.2",
        text=f"~{FIG7_PER_SYNC_X:g}x faster synchronisation than DDP ({FIG7_LATENCY_S['ddp']:.2f} s / "
        f"{FIG7_LATENCY_S['hsadmm']:.2f} s): DDP's wait-free communication per optimizer step over PruneX's per "
        "outer iteration (medians, iteration 0 left out)",
        paper_value=FIG7_PER_SYNC_X,
        unit="x",
        experiment="latency",
        measure=latency_per_sync_ratio,
        tolerance=FACTOR_TOLERANCE,
        kind="rel",
        needs=("inter_link",),
        note="iterations differ: an optimizer step for DDP, an outer ADMM iteration for PruneX; waiting for other "
        "ranks is left out of both (analysis.fig7_latency)",
        tolerance_reason="a factor claim: reproduced only within +-25% of the paper's 5x (3.75x-6.25x); the paper's "
        "5x is itself the ratio of two rounded latencies (0.50 s / 0.10 s)",
    ),
    Claim(
        id="latency_flat_spikes",
        source="sec. 5.3.2",
        text="PruneX (AR), the flat consensus, has higher and more variable latency than hierarchical PruneX",
        paper_value=NAN,
        unit="",
        experiment="latency",
        measure=latency_flat_worse,
        kind="ordering",
        tolerance_reason=QUALITATIVE,
        needs=("inter_link",),
    ),
    *[
        Claim(
            id=f"breakdown_{key}",
            source="Fig. 8; sec. 5.3.3",
            text=f"{cat} share of PruneX's communication time",
            paper_value=value,
            unit="%",
            experiment="latency_breakdown",
            measure=breakdown_share,
            tolerance=0.25,
            kind="rel",
            arg=cat,
            needs=("inter_link",),
            tolerance_reason="shares of one run, read off Fig. 8's bar without a spread: +-25% relative, the band of "
            "every value read off a figure (Fig. 7's latencies); 10 points either way, the band before, admitted "
            "0.28-1.72x of the 13.8% Broadcast share, and our seeds' shares lie within 2.5 points of each other",
            note="share among the paper's three categories (mask sync and residual AllReduce left out)",
        )
        for key, (cat, value) in zip(("inter", "intra", "broadcast"), FIG8_SHARE_PCT.items(), strict=True)
    ],
]


# -- strong scaling --------------------------------------------------------------------------------
def _speedup(*, method: str, tag: str, name: str) -> Claim:
    """Fig. 9a's speedup of `method` (`name` in the paper, `tag` in the claim's id)."""
    return Claim(
        id=f"scaling_{tag}_speedup",
        source="abstract; Fig. 9a; sec. 5.4",
        text=f"{name} speedup from {FIG9_BASE_GPUS} to {FIG9_GPUS} GPUs",
        paper_value=FIG9_SPEEDUP[method],
        unit="x",
        experiment="strong_scaling",
        measure=scaling,
        tolerance=0.15,
        kind="rel",
        tolerance_reason="a factor claim, tighter than the 25% rule: of the paper's speedups (6.75x, 5.81x, 3.71x) "
        "PruneX's is 16% above DDP's, and 15% still tells them apart",
        method=method,
        arg="speedup",
        needs=("gpu",),
    )


def _efficiency(*, method: str, tag: str, name: str, note: str = "") -> Claim:
    """Fig. 9b's parallel efficiency of `method` (`name` in the paper, `tag` in the claim's id)."""
    return Claim(
        id=f"scaling_{tag}_efficiency",
        source="Fig. 9b; sec. 5.4",
        text=f"{name} parallel efficiency at {FIG9_GPUS} GPUs",
        paper_value=FIG9_EFFICIENCY_PCT[method],
        unit="%",
        experiment="strong_scaling",
        measure=scaling,
        tolerance=10.0,
        kind="abs",
        tolerance_reason="efficiency = speedup / 8: 10 points are 0.8x of speedup, about the speedup claims' 15% "
        "band; PruneX's 84.4% and DDP's 72.7% stay apart",
        method=method,
        arg="efficiency",
        needs=("gpu",),
        note=note,
    )


STRONG_SCALING: list[Claim] = [
    _speedup(method="hsadmm", tag="prunex", name="PruneX"),
    _efficiency(method="hsadmm", tag="prunex", name="PruneX"),
    _speedup(method="ddp", tag="ddp", name="DDP"),
    _efficiency(method="ddp", tag="ddp", name="DDP", note="5.81 / 8 = 72.6%: the paper rounds differently"),
    _speedup(method="topk", tag="topk", name="Top-K"),
    Claim(
        id="scaling_ordering",
        source="abstract; sec. 5.4",
        text="PruneX scales better than DDP, and DDP better than Top-K (speedup at the largest common GPU count)",
        paper_value=NAN,
        unit="",
        experiment="strong_scaling",
        measure=scaling_ordering,
        kind="ordering",
        tolerance_reason=QUALITATIVE,
    ),
]

# -- time to accuracy ------------------------------------------------------------------------------
# what Fig. 5a's claims share: ResNet-152's curves, values compared only on the paper's hardware, else the
# ordering, which needs a slow inter-node link
_fig5a = partial(
    Claim,
    source="Fig. 5a; sec. 5.2.1",
    experiment="time_to_accuracy",
    model="resnet152",
    needs=(*PAPER_SETUP, "v100"),
    ordering_fallback=True,
    ordering_needs=("inter_link",),
)


def _window_accuracy(*, id: str, text: str, paper_value: float, method: str, tolerance_reason: str) -> Claim:
    """`method`'s best accuracy within the common window of Fig. 5a, within 3 points (assumed seed spread)."""
    return _fig5a(
        id=id,
        text=text,
        paper_value=paper_value,
        unit="%",
        measure=tta_window_accuracy,
        tolerance=3.0,
        kind="abs",
        tolerance_reason=tolerance_reason,
        method=method,
    )


TIME_TO_ACCURACY: list[Claim] = [
    _fig5a(
        id="tta_prunex_minutes",
        text="PruneX crosses the 70% accuracy target in ~8 min (ordering: PruneX reaches 70% before DDP and Top-K)",
        paper_value=8.0,
        unit="min",
        measure=tta_minutes,
        tolerance=0.25,
        kind="rel",
        tolerance_reason="'~8 min' is read off Fig. 5a at evaluation points; +-25% (6-10 min) admits the "
        "evaluation spacing and run-to-run timing, and is compared only on the paper's hardware (else the ordering)",
        method="hsadmm",
    ),
    _window_accuracy(
        id="tta_ddp_window",
        text="DDP reaches only ~65% within the time window (ordering: below PruneX at the end of the common window)",
        paper_value=65.0,
        method="ddp",
        tolerance_reason="'~65%' is read off Fig. 5a; 3 points is our assumption for the seed-to-seed spread of a "
        "CIFAR-10 test accuracy at a fixed time budget (the paper shows one run)",
    ),
    _window_accuracy(
        id="tta_topk_final",
        text="Top-K ends at ~50% accuracy (ordering: below DDP at the end of the common window)",
        paper_value=50.0,
        method="topk",
        tolerance_reason="'~50%' is read off Fig. 5a; 3 points as tta_ddp_window (assumed seed-to-seed spread)",
    ),
    Claim(
        id="gb_ddp_to_peak",
        source="Fig. 5b; sec. 5.2.2",
        text="DDP needs > 60 GB of inter-node traffic to reach its peak "
        "accuracy (ordering: more than PruneX needs to its peak)",
        paper_value=60.0,
        unit="GB",
        experiment="time_to_accuracy",
        measure=gb_to_peak,
        tolerance=0.0,
        kind="at_least",
        tolerance_reason="the paper states a lower bound ('> 60 GB'): none added",
        method="ddp",
        model="resnet152",
        needs=PAPER_SETUP,
        ordering_fallback=True,
        ordering_needs=("multinode",),
    ),
]

# -- convergence -----------------------------------------------------------------------------------
CONVERGENCE: list[Claim] = [
    Claim(
        id="residual_intra_decay",
        source="Fig. 10; sec. 5.5.1",
        text="intra-node primal residuals fall from ~1e0 to ~1e-2 on "
        "every rank (orders of magnitude of decay, fc and a conv layer, worst rank)",
        paper_value=2.0,
        unit="decades",
        experiment="residuals",
        measure=residual_decay,
        tolerance=1.0,
        kind="at_least",
        tolerance_reason="'~1e0 to ~1e-2' is read off a log-scale plot; at least 1 decade is the claim's substance "
        "(orders of magnitude of decay), not the exact count",
        method="hsadmm",
    ),
    Claim(
        id="mask_drift_zero",
        source="sec. 4.5",
        text="mask drift reaches zero within the first 5-15 iterations (the first "
        "iteration of the zero-drift tail, worst run)",
        paper_value=float(PAPER_DRIFT_WINDOW),
        unit="iterations",
        experiment="",
        measure=drift_zero,
        tolerance=0.0,
        kind="at_most",
        tolerance_reason="the paper's own window (within 5-15 iterations) is the bound: none added",
        method="hsadmm",
        note="frozen iterations are not counted; a run whose mask still drifted when T_freeze (3 or 4 in the "
        "one-machine profiles, 15 in paper) forced the freeze cannot say when it would have settled, and withholds "
        "the verdict (not decidable) unless no run settled at all (then not measurable)",
    ),
]

# -- pareto ----------------------------------------------------------------------------------------
# what the claims of sec. 5.6.1 share: ResNet-152's hsadmm runs on CIFAR-10
_r152 = partial(Claim, source="sec. 5.6.1", experiment="pareto", model="resnet152", needs=("cifar10",))
# what Table 1's inference claims share: a qualitative "High" the paper does not measure
_table1 = partial(
    Claim,
    source="Table 1; sec. 1",
    paper_value=NAN,
    unit="x",
    experiment="pareto",
    measure=inference_speedup,
    kind="ordering",
    tolerance_reason=QUALITATIVE,
    note="Table 1 says only 'High'; the paper measures no inference time",
)

PARETO: list[Claim] = [
    _r152(
        id="pareto_r152_unpruned",
        text="ResNet-152 unpruned test accuracy",
        paper_value=85.96,
        unit="%",
        measure=pareto_accuracy,
        tolerance=2.0,
        kind="abs",
        arg=0.0,
        tolerance_reason="one final accuracy (85.96%); 2 points is our assumption for the seed-to-seed spread of "
        "a ResNet's CIFAR-10 test accuracy at the paper's budget",
    ),
    _r152(
        id="pareto_r152_50",
        text="ResNet-152 test accuracy at 50% channel pruning",
        paper_value=81.39,
        unit="%",
        measure=pareto_accuracy,
        tolerance=2.0,
        kind="abs",
        arg=0.5,
        tolerance_reason="as pareto_r152_unpruned (assumed seed spread); it also spans the paper's two values "
        "for this point (81.39% in the text, 82.8% in Fig. 12's caption)",
        note="Fig. 12's caption says 82.8% for the same point",
    ),
    _r152(
        id="pareto_r152_drop20",
        text="ResNet-152 accuracy drop exceeds 1 point by 20% pruning",
        paper_value=1.0,
        unit="points",
        measure=pareto_drop,
        tolerance=0.0,
        kind="at_least",
        tolerance_reason="the paper states a lower bound ('exceeds 1 point'): none added",
        arg=0.2,
    ),
    *[
        _r152(
            id=f"pareto_r152_drop{100 * ratio:.0f}",
            text=f"ResNet-152 accuracy drop at {100 * ratio:.0f}% pruning ~{points:g} points",
            paper_value=points,
            unit="points",
            measure=pareto_drop,
            tolerance=1.5,
            kind="abs",
            tolerance_reason="a difference of two accuracies, each with its seed spread: 1.5 points",
            arg=ratio,
        )
        for ratio, points in R152_DROP_POINTS.items()
    ],
    Claim(
        id="pareto_shape",
        source="Fig. 12 caption",
        text="accuracy holds up to 50% pruning and drops swiftly only in the "
        "hyper-sparse regime (drop 0->50% smaller than drop 50%->max >= 70%, every model)",
        paper_value=NAN,
        unit="",
        experiment="pareto",
        measure=pareto_shape,
        kind="ordering",
        tolerance_reason=QUALITATIVE,
    ),
    Claim(
        id="pareto_vs_ptf",
        source="sec. 1, Table 1 (co-design of training and pruning)",
        text="H-SADMM's masks are more accurate than pruning the dense DDP model afterwards (one-shot L1, fine-tuned "
        "for H-SADMM's retraining budget) at the same achieved FLOPs, at every matched point",
        paper_value=NAN,
        unit="points",
        experiment="pareto",
        measure=pareto_vs_ptf,
        kind="ordering",
        tolerance_reason=QUALITATIVE,
        note="not a number the paper gives: the comparison its co-design argument implies (issue 17)",
    ),
    _table1(
        id="inference_speedup_cpu",
        text="structured sparsity accelerates inference: the exported compact model (channel keep 0.5) runs faster "
        "than the dense model, CPU, batch 128 (dense / compact latency)",
    ),
    _table1(id="inference_speedup_gpu", text="the same on a GPU (CUDA events, batch 128)", needs=("gpu",)),
]

# -- model sizes -----------------------------------------------------------------------------------
MODEL_SIZES: list[Claim] = [
    Claim(
        id=f"params_{model}",
        source="Table 2",
        text=f"{paper.label} has ~{paper.params_m:g}M parameters",
        paper_value=paper.params_m,
        unit="M",
        experiment="",
        measure=param_count,
        tolerance=0.5 / paper.params_m,
        kind="rel",
        tolerance_reason=f"'~{paper.params_m:g}M' is given to whole millions: half a million either way "
        f"({50 / paper.params_m:.1f}%) covers its rounding and nothing else (a band of 5% for every model, before "
        "2026-11-28, took the ~11M's 4.5% for the others too and admitted a different model)",
        model=model,
        note="the paper's counts are torchvision's ImageNet variants "
        f"({IMAGENET_PARAM_COUNTS[model] / 1e6:.2f}M: 7x7 stem, 1000 classes); ours are the CIFAR-10 models the "
        "experiments train (3x3 stem, 10 classes), counted once by prunex.training.models.count_parameters",
    )
    for model, paper in MODELS.items()
]

CLAIMS: list[Claim] = [*VOLUME, *LATENCY, *STRONG_SCALING, *TIME_TO_ACCURACY, *CONVERGENCE, *PARETO, *MODEL_SIZES]
