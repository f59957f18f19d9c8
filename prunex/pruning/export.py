"""Physical export: the compact dense model that a run's structured mask implies.

    python -m prunex.pruning.export RUN_DIR [--out FILE] [--check-samples N] [--device cpu|cuda]

Reads `RUN_DIR/config.json` and `final_model.pt` (for hsadmm the masked consensus z, zero outside
the support), removes every channel that no consumer reads, together with the filters and
BatchNorm entries that produce it, following residual adds, shortcuts and the classifier
(`prunex.pruning.channels`), and writes:

- `FILE` (default `RUN_DIR/model_compact.pt2`): the compact model as a `torch.export` program
  (graph + weights, batch dimension dynamic). It loads in any process with torch alone:
  ``torch.export.load(FILE).module()(x)``; nothing of prunex is imported.
- `RUN_DIR/export.json`: parameters and FLOPs (`torch.utils.flop_counter`, 2 per multiply-add,
  one 3 x 32 x 32 image) of the dense and compact models and their ratio (the *achieved*
  sparsity), how much of the mask was physically removable, the exactness check, and per
  constrained layer the mask's and the export's kept filters and channels.

Exactness: only exactly removable structure is removed (`removable_channels`), and the compact
model's logits are compared with the masked model's on the test set in eval mode; a relative
error (max |difference| / max |logit|) above 1e-5 is an error, never a saved file. A mask that
leaves a layer without a single non-zero weight, or a space without a single channel, is refused.

Why torch.fx and not Torch-Pruning's DependencyGraph: removing coupled channels is the easy part
of either; exactness needs, for every channel, who writes it, who reads it and whether it is
identically zero, and Torch-Pruning prunes the whole coupled group it is given without checking
that (we would classify its group items ourselves). With fx the same ~150 lines give the graph,
the exactness analysis and the slicing, refuse any operation they do not understand, and add no
dependency. `torch.export` (not TorchScript, deprecated in torch 2.x) carries the architecture.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from prunex.cluster.exits import refuse
from prunex.pruning import GroupMask
from prunex.pruning.channels import ChannelGraph, UnsupportedGraph, nonzero_counts, removable_channels, trace_channels
from prunex.training.device import device_option_error

TOLERANCE = 1e-5  # max |compact - masked| / max |masked| over the checked logits
INPUT_SHAPE = (1, 3, 32, 32)  # one CIFAR-sized image (the digits are upsampled to 32 x 32 too)
EXPORT_JSON = "export.json"
COMPACT_FILE = "model_compact.pt2"


class ExportError(ValueError):
    """The model cannot be exported as asked; the message is one line for the user."""


class ExactnessError(RuntimeError):
    """The compact model's logits differ from the masked model's: a bug, never a saved file."""


@dataclass
class LayerExport:
    layer: str  # parameter name of the conv weight
    total_out: int
    total_in: int
    mask_kept_out: int  # filters with a non-zero weight
    mask_kept_in: int  # input channels with a non-zero weight
    kept_out: int  # after export
    kept_in: int
    out_keep: str  # 0/1 per filter: kept by the export
    in_keep: str  # 0/1 per input channel
    mask_zeros: int  # zero weights (the mask)
    zeros_removed: int  # of those, physically gone


@dataclass
class ExportResult:
    model: str
    dense_params: int
    compact_params: int
    dense_flops: int
    compact_flops: int
    mask_zeros: int  # zero conv weights of the masked model
    mask_zeros_removed: int  # of those, physically removed
    live_removed: int  # non-zero conv weights removed because nothing reads what they produce
    max_rel_err: float = float("nan")
    check_samples: int = 0
    check_source: str = ""
    file: str = ""
    layers: list[LayerExport] = field(default_factory=list)

    @property
    def params_fraction(self) -> float:
        return self.compact_params / self.dense_params

    @property
    def flops_fraction(self) -> float:
        return self.compact_flops / self.dense_flops

    @property
    def mask_removed_fraction(self) -> float:
        return self.mask_zeros_removed / self.mask_zeros if self.mask_zeros else 1.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            params_fraction=self.params_fraction,
            flops_fraction=self.flops_fraction,
            mask_removed_fraction=self.mask_removed_fraction,
            tolerance=TOLERANCE,
            input_shape=list(INPUT_SHAPE),
            torch=torch.__version__,
        )
        return d


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def count_flops(model: nn.Module, input_shape: tuple[int, ...] = INPUT_SHAPE) -> int:
    """FLOPs of one forward pass (torch.utils.flop_counter: convolutions and matmuls, 2 per MAC).

    Counted on meta tensors (shapes only, nothing computed) in eval mode.
    """
    meta = {k: torch.empty_like(v, device="meta") for k, v in [*model.named_parameters(), *model.named_buffers()]}
    was_training = model.training
    model.eval()
    counter = FlopCounterMode(display=False)
    try:
        with counter:
            torch.func.functional_call(model, meta, (torch.empty(input_shape, device="meta"),))
    finally:
        model.train(was_training)
    return int(counter.get_total_flops())


def _param_name(module_name: str) -> str:
    return f"{module_name}.weight" if module_name else "weight"


def _slice_(p: Tensor | None, idx: Tensor, dim: int) -> nn.Parameter | Tensor | None:
    if p is None:
        return None
    out = p.detach().index_select(dim, idx.to(p.device)).clone()
    return nn.Parameter(out, requires_grad=p.requires_grad) if isinstance(p, nn.Parameter) else out


@torch.no_grad()
def compact(model: nn.Module, *, measure: bool = True) -> tuple[nn.Module, ExportResult]:
    """The physically smaller copy of `model` (same classes, narrower layers) and what was removed.

    With `measure=False` the FLOPs are not counted (left 0): for callers that only need the model.

    Raises:
        ExportError: a layer with no non-zero weight, a space that would lose every channel, or
            an architecture the channel analysis does not support.
    """
    try:
        cg: ChannelGraph = trace_channels(model)
    except UnsupportedGraph as e:
        raise ExportError(f"cannot export {type(model).__name__}: {e}") from None
    counts = {name: nonzero_counts(cg.modules[name]) for name in cg.in_space}
    pairs = {name: c > 0 for name, c in counts.items()}
    for name, p in pairs.items():
        if not bool(p.any()):
            raise ExportError(
                f"layer {_param_name(name)}: the mask removes every weight ({tuple(cg.modules[name].weight.shape)} "
                "all zero); a layer without channels cannot be exported"
            )
    removed = removable_channels(model, cg, pairs)
    for s in cg.spaces:
        if bool(removed[s.id].all()):
            raise ExportError(
                f"nothing reads any of the {s.size} channels written by {', '.join(s.writers) or '?'}: "
                "removing them all would leave an empty layer; refusing to export"
            )
    keep = {s: torch.nonzero(~r).flatten() for s, r in removed.items()}
    # copy the module tree but not the tensors that are replaced by their slices below
    replaced = [m.weight for n, m in cg.modules.items() if n in cg.out_space]
    replaced += [m.bias for n, m in cg.modules.items() if isinstance(m, nn.Conv2d) and n in cg.out_space]
    for s in cg.spaces:
        replaced += [
            getattr(cg.modules[n], a) for n in s.norms for a in ("weight", "bias", "running_mean", "running_var")
        ]
    small = copy.deepcopy(model, memo={id(t): None for t in replaced if t is not None})
    mods = dict(small.named_modules())
    layers, zeros, zeros_removed, live_removed = [], 0, 0, 0
    for name, s_out in cg.out_space.items():
        m = mods[name]
        s_in = cg.in_space[name]
        ko, ki = keep[s_out], keep[s_in]
        w = model.get_submodule(name).weight.detach()  # the original (m's tensors are not copied)
        if isinstance(m, nn.Conv2d):
            kept = torch.zeros(w.shape[:2], dtype=torch.bool)
            kept[ko[:, None], ki[None, :]] = True
            zero = w[0, 0].numel() - counts[name]  # zero entries per (filter, channel) kernel
            n_zero, n_zero_gone = int(zero.sum()), int(zero[~kept].sum())
            zeros, zeros_removed = zeros + n_zero, zeros_removed + n_zero_gone
            live_removed += int(counts[name][~kept].sum())
            g = GroupMask.from_support(pairs[name])  # the mask's kept filters and channels (sec. 4.4.1)
            layers.append(
                LayerExport(
                    layer=_param_name(name),
                    total_out=w.shape[0],
                    total_in=w.shape[1],
                    mask_kept_out=g.kept_out,
                    mask_kept_in=g.kept_in,
                    kept_out=len(ko),
                    kept_in=len(ki),
                    out_keep="".join("0" if r else "1" for r in removed[s_out].tolist()),
                    in_keep="".join("0" if r else "1" for r in removed[s_in].tolist()),
                    mask_zeros=n_zero,
                    zeros_removed=n_zero_gone,
                )
            )
            conv = model.get_submodule(name)
            m.weight = _slice_(_slice_(conv.weight, ko, 0), ki, 1)
            m.bias = _slice_(conv.bias, ko, 0)
            m.out_channels, m.in_channels = len(ko), len(ki)
        else:  # the classifier: only its inputs can shrink
            m.weight = _slice_(model.get_submodule(name).weight, ki, 1)
            m.in_features = len(ki)
    for space in cg.spaces:
        for name in space.norms:
            bn, orig = mods[name], model.get_submodule(name)
            for attr in ("weight", "bias", "running_mean", "running_var"):
                setattr(bn, attr, _slice_(getattr(orig, attr), keep[space.id], 0))
            bn.num_features = len(keep[space.id])
    result = ExportResult(
        model=type(model).__name__,
        dense_params=count_parameters(model),
        compact_params=count_parameters(small),
        dense_flops=count_flops(model) if measure else 0,
        compact_flops=count_flops(small) if measure else 0,
        mask_zeros=zeros,
        mask_zeros_removed=zeros_removed,
        live_removed=live_removed,
        layers=layers,
    )
    return small, result


@torch.no_grad()
def max_relative_error(reference: nn.Module, other: nn.Module, batches: Any, device: torch.device) -> tuple[float, int]:
    """max |other(x) - reference(x)| / max |reference(x)| over `batches` (eval mode); and the sample count."""
    for m in (reference, other):
        if isinstance(m, nn.Module) and not isinstance(m, torch.fx.GraphModule):
            m.eval()  # an exported program's module has its mode baked in
    diff = scale = 0.0
    n = 0
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False  # exact fp32 on GPUs
    try:
        for x in batches:
            x = x.to(device)
            a, b = reference(x), other(x)
            diff = max(diff, float((a - b).abs().max()))
            scale = max(scale, float(a.abs().max()))
            n += x.shape[0]
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    return (diff / scale if scale > 0 else diff), n


def save_program(model: nn.Module, path: str | Path) -> Path:
    """Save `model` (eval mode, on the CPU) as a torch.export program with a dynamic batch dimension."""
    model = copy.deepcopy(model).cpu().eval()
    example = (torch.zeros((2, *INPUT_SHAPE[1:])),)
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    program = torch.export.export(model, example, dynamic_shapes=({0: batch},))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")  # torch.export.save wants the suffix
    torch.export.save(program, tmp)
    tmp.replace(path)
    return path


# -- runs ---------------------------------------------------------------------------------------
CHECKSUM_SUFFIX = ".sha256"  # beside a model file: the SHA-256 of its bytes, written with it


def file_sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_checksum(path: Path) -> Path:
    """Write `path`'s SHA-256 beside it (`<path>.sha256`, atomically), so a reader can tell a damaged file."""
    from prunex.training.log import write_atomic  # lazy: pandas (prunex.training.log); importing the export needs none

    out = path.with_name(path.name + CHECKSUM_SUFFIX)
    write_atomic(out, f"{file_sha256(path)}  {path.name}\n".encode())
    return out


def verify_checksum(path: Path) -> None:
    """Refuse (ExportError, one line) a file whose bytes differ from the checksum written with it; a file
    written before checksums existed has none and is taken as it is."""
    recorded = path.with_name(path.name + CHECKSUM_SUFFIX)
    if not recorded.exists():
        return
    want = recorded.read_text().split()[0] if recorded.read_text().split() else ""
    if file_sha256(path) != want:
        raise ExportError(
            f"{path}: its bytes do not match the checksum the run wrote ({recorded.name}): the file is damaged; "
            f"train the run again (remove {path.parent}) or restore the file from a copy"
        )


def load_run_model(
    run_dir: str | Path, device: torch.device | str = "cpu", *, require_done: bool = True
) -> tuple[nn.Module, dict[str, Any]]:
    """The run's final model (`final_model.pt` into its architecture) in eval mode, and its config. The
    file's checksum (written by the run) is verified first. `require_done`: refuse a run without DONE (the
    trainer exports before it marks the run done, and passes False).

    Raises:
        ExportError: not a finished run directory, or a damaged model file.
    """
    from prunex.training.log import DONE  # lazy: pandas, as write_checksum
    from prunex.training.models import build_model  # lazy: torchvision, only to load a run's model

    run_dir = Path(run_dir)
    try:
        config = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ExportError(f"{run_dir}: not a run directory (config.json: {e})") from None
    weights = run_dir / "final_model.pt"
    if not weights.exists():
        why = (  # a finished run without its model: saved logs (saved-logs/) keep the tables only
            "; the run finished, but its folder keeps no model, as saved logs do: export it where it ran"
            if (run_dir / DONE).exists()
            else " (the run has not finished)"
        )
        raise ExportError(f"{run_dir}: no final_model.pt{why}")
    if require_done and not (run_dir / DONE).exists():
        raise ExportError(f"{run_dir}: the run has not finished (no DONE); finish it first (run its command again)")
    verify_checksum(weights)
    model = build_model(config["model"])
    try:
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    except Exception as e:  # a truncated or empty file, or one of another architecture
        raise ExportError(
            f"{weights}: not a readable model of {config['model']} ({type(e).__name__}); "
            f"train the run again (remove {run_dir})"
        ) from None
    return model.to(device).eval(), config


def test_batches(config: dict[str, Any], limit: int | None, batch_size: int = 256) -> Any:
    """The run's test images (no labels), at most `limit` of them (None: all)."""
    from torch.utils.data import DataLoader, Subset

    from prunex.training.data import load_dataset  # lazy: torchvision, only to read test images

    data = load_dataset(config["dataset"], config.get("data_root") or None, train=False)
    if limit is not None:
        data = Subset(data, range(min(limit, len(data))))
    return (x for x, _ in DataLoader(data, batch_size=batch_size, num_workers=0))


def export_run(
    run_dir: str | Path,
    out: str | Path | None = None,
    *,
    device: torch.device | str | None = None,
    check_samples: int | None = None,
    require_done: bool = True,
) -> ExportResult:
    """Export a finished run: compact model file, exactness check on the test set, `export.json`.

    Args:
        run_dir: the run directory.
        out: where the torch.export program goes (default `RUN_DIR/model_compact.pt2`).
        device: where the exactness check runs (default: CUDA when present, else the CPU).
        check_samples: test images compared (default: the whole test split).

    Raises:
        ExportError: not a finished run, or a refused mask.
        ExactnessError: logits that differ by more than 1e-5 (relative).
    """
    from prunex.training.log import write_json  # lazy: pandas, as write_checksum

    run_dir = Path(run_dir)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    masked, config = load_run_model(run_dir, device, require_done=require_done)
    small, result = compact(masked)
    result.model = config["model"]
    err, n = max_relative_error(masked, small, test_batches(config, check_samples), device)
    result.max_rel_err, result.check_samples = err, n
    result.check_source = f"{config['dataset']} test split" + ("" if check_samples is None else f" (first {n})")
    if not err <= TOLERANCE:
        raise ExactnessError(
            f"{run_dir}: the compact model's logits differ from the masked model's by {err:.3g} (relative) "
            f"on {n} test images, above {TOLERANCE:g}"
        )
    path = save_program(small, Path(out) if out else run_dir / COMPACT_FILE)
    inside = path.resolve().is_relative_to(run_dir.resolve())
    result.file = str(path.resolve().relative_to(run_dir.resolve()) if inside else path)
    write_json(run_dir / EXPORT_JSON, result.to_dict())
    return result


def summary(result: ExportResult) -> str:
    return (
        f"params {result.compact_params:,} / {result.dense_params:,} = {result.params_fraction:.3f}, "
        f"FLOPs {result.compact_flops / 1e6:.1f}M / {result.dense_flops / 1e6:.1f}M = {result.flops_fraction:.3f}; "
        f"{result.mask_zeros_removed:,} of {result.mask_zeros:,} masked conv weights removed "
        f"({100 * result.mask_removed_fraction:.1f}%), {result.live_removed:,} unread non-zero weights removed; "
        f"max relative logit error {result.max_rel_err:.2g} on {result.check_samples} images"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prunex.pruning.export", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", help="a finished run directory (config.json, final_model.pt)")
    parser.add_argument("--out", help=f"the compact model file (default RUN_DIR/{COMPACT_FILE})")
    parser.add_argument("--check-samples", type=int, help="test images for the exactness check (default: all)")
    parser.add_argument("--device", help="device of the exactness check (default: cuda when present, else cpu)")
    args = parser.parse_args(argv)
    if args.check_samples is not None and args.check_samples < 1:
        print(f"error: --check-samples must be >= 1, got {args.check_samples}", file=sys.stderr)
        return 2
    bad_device = device_option_error(args.device)
    if bad_device:  # before the run's model is loaded
        print(f"error: {bad_device}", file=sys.stderr)
        return 2
    try:
        result = export_run(args.run_dir, args.out, device=args.device, check_samples=args.check_samples)
    except (ExportError, ExactnessError) as e:
        return refuse(e, {ExportError: 2, ExactnessError: 1})
    print(f"{Path(args.run_dir).name}: {summary(result)}")
    print(f"wrote {result.file} and {Path(args.run_dir) / EXPORT_JSON}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
