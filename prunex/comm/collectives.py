"""The one layer every collective of every method goes through: timed and byte-counted.

Each call records, for this rank: iteration, level (`intra`, `inter`, `flat`), op (`allreduce`,
`broadcast`, `allgather`, `mask_sync`), payload bytes, seconds, and the estimated bytes it put on
inter- and intra-node links (`prunex.comm.volume`). Methods never call `torch.distributed`
collectives directly, so the volume accounting is complete; DDP's own collectives are recorded by
its communication hook through `record_future`.

Seconds come from the device's clock (`prunex.comm.clocks`): `perf_counter` around the call on the CPU,
CUDA events on the current stream on a GPU, read when the trainer drains the records after the
iteration (`drain`), so timing never synchronises the GPU inside a step.

Only collectives that exist on both NCCL and gloo are used: SUM, MAX and AVG reductions (AVG is
done as SUM then divide, because gloo has no AVG), broadcast and all_gather (the mask union's packed
bitsets are all-gathered and OR-ed locally, `Comm.mask_sync`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields

import torch
import torch.distributed as dist

from prunex.comm import cost as commcost
from prunex.comm.bitset import pack_bits, unpack_bits
from prunex.comm.clocks import Span, end_no_earlier, exclusive_seconds, timer_for
from prunex.comm.cost import Link
from prunex.comm.volume import group_members, wire_bytes
from prunex.training.config import ConfigError, LinkConfig
from prunex.training.topology import Groups, Topology


@dataclass
class CommRecord:
    iteration: int
    rank: int
    node: int
    level: str
    op: str
    bytes: int
    seconds: float | Span  # a Span until `Comm.drain` reads it (after the iteration)
    inter_bytes: float
    intra_bytes: float


class AlphaBetaLink:
    """Emulates slow inter-node links where real shaping is impossible (no root, not Linux).

    After a collective whose group crosses node boundaries, every member waits the collective's time
    on a link of latency alpha and bandwidth beta (Hockney's model on the ring,
    `prunex.comm.cost.collective_time`, chain broadcast): ``ring_steps * alpha + bandwidth_bytes / beta``.
    Intra-node collectives are not delayed. The performance model prices emulated runs with the same
    function.
    """

    def __init__(self, cfg: LinkConfig) -> None:
        self.link = Link(cfg.alpha_s, cfg.bandwidth_gbit * 1e9 / 8)  # beta in bytes per second

    def delay(self, topo: Topology, level: str, op: str, nbytes: int) -> float:
        if not commcost.crosses(level, topo.nodes):
            return 0.0
        return commcost.collective_time(op, nbytes, len(group_members(topo, level)), self.link, "ring")


class Comm:
    """Instrumented collectives over the intra, inter and flat groups of one rank.

    Args:
        topo: this rank's topology.
        groups: its process groups.
        device: where its tensors live; its clock times the collectives (`prunex.comm.clocks`).
        link: link model; `alpha-beta` adds modelled delays to inter-node collectives (CPU only).
    """

    def __init__(self, topo: Topology, groups: Groups, device: torch.device, link: LinkConfig | None = None):
        self.topo, self.groups, self.device = topo, groups, device
        self.link_model = (link or LinkConfig()).model
        if self.link_model == "alpha-beta" and device.type == "cuda":
            # the modelled delay is a host sleep, which a GPU's event clock does not see
            raise ConfigError(
                "the alpha-beta link model emulates slow links for CPU runs; on GPUs use --link-model none"
            )
        self.timer = timer_for(device)
        self._origin = self.timer.start()  # the clock's zero for the spans' intervals (never stopped)
        self._alpha_beta = AlphaBetaLink(link) if link is not None and link.model == "alpha-beta" else None
        self.iteration = 0
        self.current: str | None = None  # the collective in flight, for error messages
        self.records: list[CommRecord] = []
        self.job_inter_bytes = 0.0  # all members' inter-node bytes of the calls this rank joined
        self._timing: torch.cuda.Stream | None = None  # CUDA: where asynchronous spans end

    # -- bookkeeping ------------------------------------------------------------------------------
    def record(self, level: str, op: str, nbytes: int, seconds: float | Span, root: int = 0) -> CommRecord:
        """Record one collective (used directly by asynchronous paths such as DDP's hook); `seconds`
        may be a stopped `Span`, read at `drain`."""
        inter, intra = wire_bytes(self.topo, level, op, nbytes, root)
        rec = CommRecord(self.iteration, self.topo.rank, self.topo.node, level, op, int(nbytes), seconds, inter, intra)
        self.records.append(rec)
        if self.topo.rank == min(group_members(self.topo, level)):
            self.job_inter_bytes += sum(
                wire_bytes(self.topo, level, op, nbytes, root, rank=m)[0] for m in group_members(self.topo, level)
            )
        return rec

    @contextmanager
    def _timed(self, level: str, op: str, nbytes: int, root: int = 0) -> Iterator[None]:
        self.current = f"{level} {op}"
        span = self.timer.start()
        yield
        self.current = None
        if self._alpha_beta is not None:
            time.sleep(self._alpha_beta.delay(self.topo, level, op, nbytes))
        self.record(level, op, nbytes, span.stop(), root)

    def record_future(self, fut: torch.futures.Future, level: str, op: str, nbytes: int) -> torch.futures.Future:
        """Record an asynchronous collective from its launch to its completion.

        The span starts here, just after the launch (on CUDA: on the stream that produced the
        bucket, i.e. the backward pass), and stops in the future's callback: on the CPU when gloo
        has finished; on CUDA on the callback's stream, which torch makes wait for the collective
        (NCCL marks the future complete at enqueue, so a host clock there would read ~0). The
        seconds are read after the step (`drain`).
        """
        span = self.timer.start()
        iteration = self.iteration

        def done(f: torch.futures.Future) -> torch.Tensor:
            if self._alpha_beta is not None:  # the modelled link holds the result back, as a slow link would
                time.sleep(self._alpha_beta.delay(self.topo, level, op, nbytes))
            saved, self.iteration = self.iteration, iteration
            self.record(level, op, nbytes, span.stop())
            self.iteration = saved
            return f.value()[0] if isinstance(f.value(), list) else f.value()

        return fut.then(done)

    def drain(self) -> list[dict]:
        """Hand over (and forget) the records made so far, as dicts, their seconds read (on CUDA this
        waits for the recorded events: call it after the iteration). ``exclusive_s``: the seconds each
        call adds to the union of the drained calls' spans (`prunex.comm.clocks.exclusive_seconds`), so that
        calls in flight together (pipelined buckets, DDP's buckets) are counted once when summed; a
        call recorded with plain seconds (no span) counts whole."""
        out, intervals = [], []
        for r in self.records:
            row = {f.name: getattr(r, f.name) for f in fields(r)}
            span = row["seconds"]
            if isinstance(span, Span):
                row["seconds"] = span.seconds
                intervals.append(span.interval(self._origin))
            else:
                intervals.append((float("nan"), float("nan")))
            out.append(row)
        spanned = [i for i, iv in enumerate(intervals) if iv[0] == iv[0]]
        exclusive = exclusive_seconds([intervals[i] for i in spanned])
        for row in out:
            row["exclusive_s"] = row["seconds"]
        for i, x in zip(spanned, exclusive, strict=True):
            out[i]["exclusive_s"] = x
        self.records.clear()
        return out

    # -- collectives ------------------------------------------------------------------------------
    def all_reduce(self, t: torch.Tensor, level: str, op: str = "sum", *, tag: str = "allreduce") -> torch.Tensor:
        """In-place AllReduce of `t` over the `level` group. op: "sum", "avg" or "max"."""
        group = self.groups.get(level)
        reduce_op = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}[op]
        with self._timed(level, tag, t.numel() * t.element_size()):
            dist.all_reduce(t, op=reduce_op, group=group)
        if op == "avg":
            t.div_(dist.get_world_size(group))
        return t

    def all_reduce_start(self, t: torch.Tensor, level: str, op: str = "sum") -> Callable[[], torch.Tensor]:
        """Launch an in-place AllReduce of `t` (``async_op=True``) and return its ``wait``: it blocks until
        the collective is done (on CUDA: makes the current stream wait), divides for "avg" and records the
        call, timed from the launch to the completion. Work done between the two overlaps the transfer."""
        group = self.groups.get(level)
        reduce_op = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}[op]
        nbytes = t.numel() * t.element_size()
        cuda = self.device.type == "cuda"
        span = None if cuda else self.timer.start()
        work = dist.all_reduce(t, op=reduce_op, group=group, async_op=True)
        launched = time.perf_counter()
        stopped: Span | None = None
        completed: torch.futures.Future | None = None
        if not cuda:
            # the span ends when gloo has finished (the future's callback), not at `wait`: the host's work in
            # between (the next bucket's fill, the previous one's broadcast and unpack) is not communication
            completed = work.get_future().then(lambda _f: span.stop())
        if cuda:
            # Both ends are enqueued now, after the launch, on a stream of their own: it waits for what the
            # collective waits for (the current stream's work so far), marks the start, waits for the
            # collective alone and marks the end. An event recorded on an idle stream completes when the host
            # records it, so a start recorded before the launch would time the host's launch overhead, and
            # an end recorded at `wait` the host's work in between (the next bucket's fill); an end on the
            # current stream would also time the GPU work enqueued there since the launch (issue 27).
            stream = self._timing_stream()
            stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                span = self.timer.start()
                work.wait()  # the timing stream waits for the collective; the host does not
                stopped = span.stop()

        def wait() -> torch.Tensor:
            self.current = f"{level} allreduce"
            work.wait()
            if completed is not None:
                completed.wait()  # its callback has run: the span has its end
            self.current = None
            if self._alpha_beta is not None:  # the modelled link is busy from the launch for its delay
                modelled_end = launched + self._alpha_beta.delay(self.topo, level, "allreduce", nbytes)
                time.sleep(max(0.0, modelled_end - time.perf_counter()))
                if span is not None:  # the host span (alpha-beta is CPU-only): it ends with the modelled transfer
                    end_no_earlier(span, modelled_end)
            self.record(level, "allreduce", nbytes, stopped if stopped is not None else span)
            if op == "avg":
                t.div_(dist.get_world_size(group))
            return t

        return wait

    def _timing_stream(self) -> torch.cuda.Stream:
        """A CUDA stream where asynchronous collectives' spans end (`all_reduce_start`), made on first use."""
        if self._timing is None:
            self._timing = torch.cuda.Stream(self.device)
        return self._timing

    def broadcast(self, t: torch.Tensor, level: str, src: int | None = None) -> torch.Tensor:
        """In-place Broadcast from global rank `src` (default: the group's lowest rank, i.e. the
        node leader for `intra`)."""
        group = self.groups.get(level)
        src = min(group_members(self.topo, level)) if src is None else src
        with self._timed(level, "broadcast", t.numel() * t.element_size(), root=src):
            dist.broadcast(t, src=src, group=group)
        return t

    def all_gather(self, t: torch.Tensor, level: str) -> list[torch.Tensor]:
        """AllGather of equally shaped tensors; returns one tensor per member, in rank order."""
        group = self.groups.get(level)
        out = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
        with self._timed(level, "allgather", t.numel() * t.element_size()):
            dist.all_gather(out, t, group=group)
        return out

    def all_gather_into(self, out: torch.Tensor, shard: torch.Tensor, level: str) -> torch.Tensor:
        """AllGather of equal shards into the flat ``out`` in rank order; ``shard`` may be this member's
        own slice of ``out`` (in place, as NCCL documents). Recorded as an ``allgather`` of the shard."""
        group = self.groups.get(level)
        with self._timed(level, "allgather", shard.numel() * shard.element_size()):
            dist.all_gather_into_tensor(out, shard, group=group)
        return out

    def barrier(self, level: str) -> None:
        """Wait for every member: a 1-byte AllReduce recorded as `barrier`, so that time spent waiting
        for stragglers is not charged to the transfer that follows."""
        self.all_reduce(torch.zeros(1, dtype=torch.uint8, device=self.device), level, "max", tag="barrier")

    def mask_sync(self, masks: torch.Tensor, level: str = "inter") -> torch.Tensor:
        """Union of the members' binary masks, eq. (14), in place, sent as packed bitsets.

        Each member packs its G uint8 flags eight to a byte (`prunex.comm.bitset`), the group
        all-gathers the packed bytes, and every member ORs the M bitsets locally and unpacks. A packed
        bitset cannot be reduced by the backend: NCCL has no bitwise OR, and a MAX of packed bytes loses
        bits (max(0b01, 0b10) = 0b10). Bytes each member sends on the ring: (M-1) ceil(G/8), against
        2 (M-1)/M G for an AllReduce-MAX of one byte per flag: 16/M times fewer, so fewer below
        M = 16 nodes; with M - 1 messages on the critical path instead of 2 (M - 1), it is also the
        lower-latency choice at any M for these few-KB messages. Recorded as one ``mask_sync`` of the
        packed payload (`prunex.comm.cost` prices it as an AllGather).
        """
        if masks.dtype != torch.uint8:
            raise TypeError(f"mask_sync takes uint8 masks, got {masks.dtype}")
        packed = pack_bits(masks)
        group = self.groups.get(level)
        gathered = [torch.empty_like(packed) for _ in range(dist.get_world_size(group))]
        with self._timed(level, "mask_sync", packed.numel()):
            dist.all_gather(gathered, packed, group=group)
        union = gathered[0]
        for other in gathered[1:]:
            union = union.bitwise_or(other)
        return unpack_bits(union, masks.numel(), out=masks)
