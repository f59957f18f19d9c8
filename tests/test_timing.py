"""One clock per device (`prunex.comm.clocks`): the CPU path is perf_counter, the choice follows the device."""

import time

import pytest
import torch

from prunex.comm import Comm
from prunex.comm.clocks import CPUTimer, CUDATimer, timer_for
from prunex.training.config import ConfigError, LinkConfig, RunConfig
from prunex.training.topology import Topology


def test_the_clock_follows_the_device() -> None:
    assert isinstance(timer_for(torch.device("cpu")), CPUTimer)
    cuda = timer_for(torch.device("cuda", 1))  # choosing it needs no GPU; starting a span would
    assert isinstance(cuda, CUDATimer) and cuda.device == torch.device("cuda", 1)
    comm = Comm(Topology(0, 1, nodes=1, procs_per_node=1), None, torch.device("cpu"))
    assert isinstance(comm.timer, CPUTimer)


def test_cpu_span_measures_host_time_between_start_and_stop() -> None:
    span = CPUTimer().start()
    time.sleep(0.05)
    s = span.stop().seconds
    assert 0.05 <= s < 1.0
    assert span.seconds == s  # read as often as wanted
    with pytest.raises(RuntimeError, match="before stop"):
        _ = CPUTimer().start().seconds


def test_alpha_beta_link_model_is_cpu_only() -> None:
    # its delay is a host sleep, which the GPU's event clock would not see
    topo = Topology(0, 1, nodes=1, procs_per_node=1)
    with pytest.raises(ConfigError, match="alpha-beta"):
        Comm(topo, None, torch.device("cuda", 0), LinkConfig(model="alpha-beta"))
    with pytest.raises(ConfigError, match="alpha-beta"):
        RunConfig(method="ddp", device="cuda", link=LinkConfig(model="alpha-beta"))


def test_exclusive_seconds_sum_to_the_union_of_overlapping_spans() -> None:
    """Spans in flight together (pipelined buckets: bucket b launched before b-1 completes) count once."""
    from prunex.comm.clocks import exclusive_seconds

    assert exclusive_seconds([(0.0, 1.0), (2.0, 3.0)]) == [1.0, 1.0]  # disjoint: their lengths
    assert exclusive_seconds([(0.0, 4.0), (3.0, 6.0), (5.0, 7.0)]) == [4.0, 2.0, 1.0]  # a pipeline: union 7
    assert exclusive_seconds([(2.0, 5.0), (0.0, 10.0)]) == [0.0, 10.0]  # nested, recorded out of order
    assert exclusive_seconds([]) == []


def test_drained_calls_in_flight_together_add_up_to_their_union() -> None:
    """Two asynchronous AllReduces between two real gloo processes over the alpha-beta link (about 1 s each: its
    two ring steps of 0.5 s), the second launched right after the first, before it is waited: their spans overlap
    (however loaded the machine, unless the second launch takes a second), and their exclusive seconds add up to
    the union of the two spans."""
    from distributed import run_distributed

    out = run_distributed(_two_in_flight, 2)[0]
    first, second = out["rows"]
    assert out["overlap"] > 0  # the spans overlap
    assert first["seconds"] + second["seconds"] > out["union"] + 0.5 * out["overlap"]
    assert abs(first["exclusive_s"] + second["exclusive_s"] - out["union"]) < 1e-9


def _two_in_flight(rank: int) -> dict:

    import torch

    from prunex.comm import Comm
    from prunex.training.config import LinkConfig
    from prunex.training.topology import build_groups, discover

    topo = discover(2, 1)
    comm = Comm(topo, build_groups(topo, 60), torch.device("cpu"), LinkConfig(model="alpha-beta", alpha_s=0.5))
    a, b = torch.ones(8), torch.ones(8)
    wait_a = comm.all_reduce_start(a, "flat")
    wait_b = comm.all_reduce_start(b, "flat")
    wait_a()
    wait_b()
    spans = [r.seconds for r in comm.records]
    intervals = [s.interval(comm._origin) for s in spans]
    union = max(e for _, e in intervals) - min(s for s, _ in intervals)
    overlap = min(e for _, e in intervals) - max(s for s, _ in intervals)
    return {"rows": comm.drain(), "union": union, "overlap": overlap}


def test_an_asynchronous_allreduce_ends_when_gloo_finishes_not_when_it_is_waited() -> None:
    """Review (2026-11-28): on the CPU an AllReduce launched with `all_reduce_start` was timed to its `wait`, so
    with pipelined buckets its span held the host's work in between (the next bucket's fill, the previous one's
    unpack). It now ends in the future's callback, when gloo has finished; with the alpha-beta link, when the
    modelled transfer has too (the previous test)."""
    from distributed import run_distributed

    seconds, host = run_distributed(_host_work_before_wait, 1)[0]
    assert host >= 1.0 and seconds < 0.5, (seconds, host)  # to its wait it would be over 1 s


def _host_work_before_wait(rank: int) -> tuple[float, float]:
    import time

    import torch

    from prunex.comm import Comm
    from prunex.training.topology import build_groups, discover

    topo = discover(1, 1)
    comm = Comm(topo, build_groups(topo, 60), torch.device("cpu"))
    wait = comm.all_reduce_start(torch.ones(8), "flat")
    t = time.perf_counter()
    time.sleep(1.0)  # the host's work between the launch and the wait
    host = time.perf_counter() - t
    wait()
    return comm.drain()[0]["seconds"], host
