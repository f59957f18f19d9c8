"""Channel dependencies of a CNN, from its torch.fx graph: who writes and who reads each channel.

A *channel space* is a set of feature-map channels that must be indexed alike. A convolution
opens one (its output channels); BatchNorm, ReLU, pooling, dropout and flatten (after a 1x1
global pool) carry it unchanged; a residual add merges the spaces of its operands (ResNet's
shortcut stream: the stem, every block's last convolution and the downsample convolutions write
into the same space). A convolution or the classifier *reads* its input space.

`removable_channels` decides which channels of each space can be removed from the network
without changing a single output, given the weights as they are (zeros included):

- a channel is removable when no remaining reader uses it: for every convolution or linear layer
  reading the space, either all of its (kept) weights on that input channel are exactly zero, or
  the channel is identically zero where it is read. Its writers' filters, BatchNorm entries and
  its readers' input slices then go with it;
- "identically zero" is tracked exactly by propagating per-channel constants through the graph:
  a convolution's output channel is the constant bias when every weight it applies to a
  non-zero input is zero (zero padding keeps it constant), BatchNorm maps a constant to a
  constant (eval mode), ReLU(c <= 0) = 0, an add sums constants. A filter that the mask zeroes
  but whose BatchNorm shift is non-zero produces a non-zero constant: removing it would change
  the output (its readers see beta at every interior position), so it stays unless nobody reads it;
- removing a writer's filter stops it from reading its own inputs through that filter, which can
  make channels of an earlier space unread: the analysis repeats until nothing changes;
- the network input (image planes) and output (logits) spaces never shrink.

Only these operations are understood: Conv2d (groups = 1), BatchNorm2d, ReLU, Identity, Dropout,
MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, flatten after a 1 x 1 global pool, Linear, add. Any other
operation raises `UnsupportedGraph` naming it, so a model we do not understand is refused rather
than exported wrongly.

Example::

    PYTHONPATH=. python -c "from prunex.training.models import build_model; from prunex.pruning.channels import \\
        trace_channels; print(*trace_channels(build_model('resnet20')).spaces[:3], sep='\\n')"
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ChannelSpace", "ChannelGraph", "UnsupportedGraph", "trace_channels", "removable_channels", "nonzero_counts"]

_PASS_MODULES = (nn.ReLU, nn.Identity, nn.Dropout, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d)
_ADD = (operator.add, operator.iadd, torch.add)
_RELU = (F.relu, torch.relu)


class UnsupportedGraph(ValueError):
    """The model contains an operation whose channel dependencies this module does not know."""


@dataclass
class ChannelSpace:
    """Channels that are indexed alike throughout the network.

    Attributes:
        id: index in `ChannelGraph.spaces`.
        size: number of channels.
        writers: Conv2d module names whose output channels are this space.
        norms: BatchNorm2d module names normalising it.
        readers: Conv2d / Linear module names reading it as their input channels.
        residual: merged by a residual add (a shortcut stream).
        fixed: why the space cannot shrink ("network input", "network output"), or "".
    """

    id: int
    size: int
    writers: list[str] = field(default_factory=list)
    norms: list[str] = field(default_factory=list)
    readers: list[str] = field(default_factory=list)
    residual: bool = False
    fixed: str = ""

    @property
    def internal(self) -> bool:
        """One writer, no shortcut, neither end of the network: prunable without coupling (Li et al. 2017)."""
        return len(self.writers) == 1 and not self.residual and not self.fixed


@dataclass
class ChannelGraph:
    """The traced network: its channel spaces and, per conv/linear module, its input and output space."""

    graph: fx.Graph
    modules: dict[str, nn.Module]
    spaces: list[ChannelSpace]
    node_space: dict[str, int]  # fx node name -> space of its channels
    in_space: dict[str, int]  # conv / linear module name -> space it reads
    out_space: dict[str, int]  # conv / linear module name -> space it writes
    reader_inputs: dict[str, str]  # conv / linear module name -> fx node name of its input


class _UnionFind:
    def __init__(self) -> None:
        self.parent: list[int] = []

    def new(self) -> int:
        self.parent.append(len(self.parent))
        return len(self.parent) - 1

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        self.parent[max(a, b)] = min(a, b)
        return min(a, b)


def _is_global_pool(m: nn.Module) -> bool:
    if not isinstance(m, nn.AdaptiveAvgPool2d):
        return False
    size = m.output_size if isinstance(m.output_size, tuple) else (m.output_size, m.output_size)
    return tuple(size) == (1, 1)


def trace_channels(model: nn.Module) -> ChannelGraph:
    """Trace `model` with torch.fx and group its feature-map channels into spaces.

    Raises:
        UnsupportedGraph: on an operation outside the module docstring's list, a grouped
            convolution, a flatten that does not follow a 1 x 1 global pool, or mismatched widths.
    """
    gm = fx.symbolic_trace(model)
    modules = dict(gm.named_modules())
    uf = _UnionFind()
    size: dict[int, int] = {}
    node_uf: dict[str, int] = {}
    writers: dict[str, int] = {}
    readers: dict[str, int] = {}
    reader_inputs: dict[str, str] = {}
    norms: dict[str, int] = {}
    residual: set[int] = set()
    fixed: dict[int, str] = {}
    global_pooled: set[str] = set()

    def space_of(arg: object, node: fx.Node) -> int:
        if not isinstance(arg, fx.Node) or arg.name not in node_uf:
            raise UnsupportedGraph(f"node {node.name}: its input is not a traced feature map")
        return node_uf[arg.name]

    def need_width(s: int, width: int, node: fx.Node) -> None:
        if size[uf.find(s)] != width:
            raise UnsupportedGraph(f"node {node.name}: expects {width} channels, its input has {size[uf.find(s)]}")

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            s = uf.new()
            size[s], fixed[s] = 3, "network input"
            node_uf[node.name] = s
        elif node.op == "output":
            arg = node.args[0]
            fixed[uf.find(space_of(arg, node))] = "network output"
        elif node.op == "call_module":
            m = modules[node.target]
            src = space_of(node.args[0], node)
            if isinstance(m, (nn.Conv2d, nn.Linear)):  # reads one channel space, writes a new one
                if isinstance(m, nn.Conv2d) and m.groups != 1:
                    raise UnsupportedGraph(f"{node.target}: grouped convolution (groups={m.groups}) is not supported")
                if isinstance(m, nn.Linear) and node.args[0].name not in global_pooled:
                    raise UnsupportedGraph(f"{node.target}: a Linear layer must read a flattened 1 x 1 global pool")
                conv = isinstance(m, nn.Conv2d)
                need_width(src, m.in_channels if conv else m.in_features, node)
                s = uf.new()
                size[s] = m.out_channels if conv else m.out_features
                writers[node.target], readers[node.target] = s, src
                reader_inputs[node.target] = node.args[0].name
                node_uf[node.name] = s
            elif isinstance(m, nn.BatchNorm2d):
                need_width(src, m.num_features, node)
                norms[node.target] = src
                node_uf[node.name] = src
            elif isinstance(m, _PASS_MODULES):
                node_uf[node.name] = src
                if _is_global_pool(m):
                    global_pooled.add(node.name)
            else:
                raise UnsupportedGraph(f"{node.target}: {type(m).__name__} is not supported by the channel analysis")
        elif node.op == "call_function":
            if node.target in _ADD:
                a, b = (space_of(x, node) for x in node.args[:2])
                if size[uf.find(a)] != size[uf.find(b)]:
                    raise UnsupportedGraph(f"node {node.name}: adds feature maps of different widths")
                s = uf.union(a, b)
                residual.add(s)
                node_uf[node.name] = s
            elif node.target in _RELU:
                node_uf[node.name] = space_of(node.args[0], node)
            elif node.target is torch.flatten:
                src = node.args[0]
                if not isinstance(src, fx.Node) or src.name not in global_pooled:
                    raise UnsupportedGraph(f"node {node.name}: flatten is supported only after a 1 x 1 global pool")
                node_uf[node.name] = space_of(src, node)
                global_pooled.add(node.name)
            else:
                raise UnsupportedGraph(f"node {node.name}: function {node.target} is not supported")
        else:
            raise UnsupportedGraph(f"node {node.name}: {node.op} {node.target} is not supported")

    roots = sorted({uf.find(s) for s in node_uf.values()})
    index = {r: i for i, r in enumerate(roots)}
    spaces = [ChannelSpace(id=i, size=size[r]) for i, r in enumerate(roots)]
    for r in residual:
        spaces[index[uf.find(r)]].residual = True
    for r, why in fixed.items():
        spaces[index[uf.find(r)]].fixed = why
    sid = lambda s: index[uf.find(s)]  # noqa: E731
    for name, s in writers.items():
        if isinstance(modules[name], nn.Conv2d):
            spaces[sid(s)].writers.append(name)
    for name, s in norms.items():
        spaces[sid(s)].norms.append(name)
    for name, s in readers.items():
        spaces[sid(s)].readers.append(name)
    return ChannelGraph(
        graph=gm.graph,
        modules=modules,
        spaces=spaces,
        node_space={n: sid(s) for n, s in node_uf.items()},
        in_space={n: sid(s) for n, s in readers.items()},
        out_space={n: sid(s) for n, s in writers.items()},
        reader_inputs=reader_inputs,
    )


@torch.no_grad()
def nonzero_counts(m: nn.Module) -> Tensor:
    """C_out x C_in: non-zero entries of each (filter, input channel) kernel of a conv / linear weight."""
    w = m.weight.detach()
    return (w != 0).reshape(w.shape[0], w.shape[1], -1).sum(dim=2).cpu()


@torch.no_grad()
def _constants(cg: ChannelGraph, pairs: dict[str, Tensor]) -> dict[str, Tensor]:
    """Per fx node, each channel's value where it is exactly constant over space and batch, NaN
    where it varies (eval mode). Computed in float64 except BatchNorm, which runs its own kernel."""
    nan = float("nan")
    const: dict[str, Tensor] = {}
    for node in cg.graph.nodes:
        if node.op == "placeholder":
            const[node.name] = torch.full((3,), nan, dtype=torch.float64)
        elif node.op == "call_module":
            m = cg.modules[node.target]
            x = const[node.args[0].name]
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                live = pairs[node.target] & (x != 0)[None, :]
                bias = m.bias.detach().cpu().double() if m.bias is not None else torch.zeros(live.shape[0])
                const[node.name] = torch.where(live.any(dim=1), torch.tensor(nan, dtype=torch.float64), bias.double())
            elif isinstance(m, nn.BatchNorm2d):
                if m.running_mean is None or m.running_var is None:
                    raise UnsupportedGraph(f"{node.target}: BatchNorm without running statistics")
                inp = x.to(device=m.running_mean.device, dtype=m.running_mean.dtype).view(1, -1, 1, 1)
                y = F.batch_norm(inp, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps)
                const[node.name] = y.cpu().double().view(-1)
            elif isinstance(m, nn.ReLU):
                const[node.name] = x.clamp(min=0)
            else:  # pooling, identity, dropout: zeros stay zero (a mean of equal non-zeros may round)
                const[node.name] = torch.where(x == 0, x, torch.tensor(nan, dtype=torch.float64))
        elif node.op == "call_function":
            if node.target in _ADD:
                const[node.name] = const[node.args[0].name] + const[node.args[1].name]
            elif node.target in _RELU:
                const[node.name] = const[node.args[0].name].clamp(min=0)
            else:  # flatten
                const[node.name] = const[node.args[0].name]
    return const


@torch.no_grad()
def removable_channels(
    model: nn.Module, cg: ChannelGraph | None = None, pairs: dict[str, Tensor] | None = None
) -> dict[int, Tensor]:
    """Channels of each space whose removal leaves every output of `model` (eval mode) unchanged.

    Args:
        model: the network, with its pruned weights exactly zero; BatchNorm in eval mode semantics.
        cg: `trace_channels(model)`, if already computed.
        pairs: which kernels are non-zero (`nonzero_counts(m) > 0`) per conv / linear module, if known.

    Returns:
        space id -> bool vector over the space's channels, True = removable (module docstring).
    """
    cg = cg or trace_channels(model)
    pairs = pairs or {name: nonzero_counts(cg.modules[name]) > 0 for name in cg.in_space}
    const = _constants(cg, pairs)
    removed = {s.id: torch.zeros(s.size, dtype=torch.bool) for s in cg.spaces}
    # per reader: which (output, input) pairs carry a non-zero weight applied to a non-zero input
    live = {name: pairs[name] & (const[cg.reader_inputs[name]] != 0)[None, :] for name in cg.in_space}
    while True:
        changed = False
        for s in cg.spaces:
            if s.fixed:
                continue
            read = torch.zeros(s.size, dtype=torch.bool)
            for r in s.readers:
                kept_out = ~removed[cg.out_space[r]]
                read |= live[r][kept_out].any(dim=0)
            new = ~read
            if not torch.equal(new, removed[s.id]):
                removed[s.id], changed = new | removed[s.id], True
        if not changed:
            return removed
