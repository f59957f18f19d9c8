"""CPU training steps with and without `prunex.training.allocator.keep_freed_memory`, side by side.

Run::

    PYTHONPATH=. python -m prunex.bench.allocator [--model resnet20] [--batch 32] [--steps 40] [--repeats 3]
        [--procs 1]

Each repeat starts fresh processes twice in turn, ``--procs`` at once each time (4 on this 2-core VM is a
2 x 2 run's load), once with glibc's defaults (``PRUNEX_MALLOC=default``) and once with the settings (they
are process-wide and cannot be undone in a process): one torch thread, ``--warmup`` SGD steps, then
``--steps`` timed ones on a fixed random batch. Per process it prints the milliseconds per step, the minor
page faults and the system CPU seconds of the timed steps, and the last loss (equal in both: where a buffer
lives does not change what is computed); then the ratio of the medians, defaults / settings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

STEPS = """
import json, resource, sys, time, torch
from prunex.training.allocator import keep_freed_memory
from prunex.training.models import build_model
model_name, batch, warmup, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
applied = keep_freed_memory()
torch.set_num_threads(1)
torch.manual_seed(0)
model = build_model(model_name)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
def step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()
for _ in range(warmup):
    step()
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
losses = [step() for _ in range(steps)]
t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"applied": applied, "ms_per_step": (t1 - t0) / steps * 1e3, "faults": r1.ru_minflt - r0.ru_minflt,
                  "sys_s": r1.ru_stime - r0.ru_stime, "losses": losses}))
"""


def run_once(model: str, batch: int, warmup: int, steps: int, kept: bool, procs: int = 1) -> list[dict]:
    """`procs` processes at once, with the settings (`kept`) or glibc's defaults; each one's result: whether the
    settings were applied, ms per timed step, page faults and system seconds of the timed steps, their losses."""
    env = dict(os.environ)
    if kept:
        env.pop("PRUNEX_MALLOC", None)
    else:
        env["PRUNEX_MALLOC"] = "default"
    args = [sys.executable, "-c", STEPS, model, str(batch), str(warmup), str(steps)]
    running = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True) for _ in range(procs)]
    results = []
    for proc in running:
        out, _ = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"a benchmark process exited with {proc.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m prunex.bench.allocator", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet20")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--procs", type=int, default=1, help="processes stepping at once (default 1)")
    args = p.parse_args(argv)
    if min(args.batch, args.warmup, args.steps, args.repeats, args.procs) < 1:
        p.error("--batch, --warmup, --steps, --repeats and --procs must be >= 1")
    from prunex.training.models import MODELS  # lazy: torchvision; the children build the model by this name

    if args.model not in MODELS:  # here, not as a traceback of the first child
        p.error(f"unknown --model {args.model!r}; known: {', '.join(sorted(MODELS))}")
    times: dict[bool, list[float]] = {False: [], True: []}
    for r in range(args.repeats):
        for kept in (False, True):
            label = "settings" if kept else "defaults"
            for res in run_once(args.model, args.batch, args.warmup, args.steps, kept, args.procs):
                times[kept].append(res["ms_per_step"])
                print(
                    f"repeat {r} {label:8s} {res['ms_per_step']:7.1f} ms/step  {res['faults']:7d} minor faults  "
                    f"{res['sys_s']:5.2f} s system  last loss {res['losses'][-1]!r}",
                    flush=True,
                )
    defaults, kept = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"{args.model} batch {args.batch}, {args.steps} steps, 1 thread, {args.procs} process(es) at once: median "
        f"{defaults:.1f} ms/step with glibc's defaults, {kept:.1f} with the settings = {defaults / kept:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
