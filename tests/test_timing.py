"""One clock per device (`prunex.timing`): the CPU path is perf_counter, the choice follows the device."""

import time

import pytest
import torch

from prunex.comm import Comm
from prunex.config import ConfigError, LinkConfig, RunConfig
from prunex.timing import CPUTimer, CUDATimer, timer_for
from prunex.topology import Topology


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
