"""``python -m prunex.minicluster up|shape|down|status|env``."""

from __future__ import annotations

import argparse
import shlex
import signal
import sys

from .cluster import DEFAULT_DIR, MiniCluster, down_all
from .host import MiniClusterError, missing_requirements, requirements_message


def _interrupt(signum, frame):  # SIGINT/TERM/HUP: `up` then tears down what it made
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m prunex.minicluster", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="bring a cluster up (a stale one in the same dir is removed first)")
    up.add_argument("--nodes", type=int, default=2)
    up.add_argument("--cpus-per-node", type=int, default=2)
    up.add_argument("--inter-bw", default="1gbit", help="tc rate of every node link, e.g. 1gbit; 0 = unshaped")
    up.add_argument("--inter-latency", default=None, help="one-way added latency, e.g. 0.2ms (needs sch_netem)")
    up.add_argument("--mtu", type=int, default=9000)
    up.add_argument("--mem-per-node-mb", type=int, default=None)
    up.add_argument("-q", "--quiet", action="store_true")
    shape = sub.add_parser("shape", help="set every node link of the running cluster to another tc rate, in place")
    shape.add_argument("--inter-bw", required=True, help="tc rate, e.g. 1gbit")
    for name in ("up", "shape", "down", "status", "env"):
        sp = {"up": up, "shape": shape}.get(name) or sub.add_parser(name)
        sp.add_argument("--dir", default=DEFAULT_DIR, help=f"cluster directory (default ./{DEFAULT_DIR})")
        if name == "down":
            sp.add_argument("--all", action="store_true", help="remove every minicluster on this machine")
    args = p.parse_args(argv)

    if args.cmd == "up":
        missing = missing_requirements()
        if missing:
            print(requirements_message(missing), file=sys.stderr)
            return 2
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGINT too: run_all.sh starts it in the
            signal.signal(sig, _interrupt)  # background, where SIGINT is ignored unless a handler is set
        try:
            shape = ("nodes", "cpus_per_node", "inter_bw", "inter_latency", "mtu", "mem_per_node_mb")  # up's options
            c = MiniCluster(args.dir, verbose=not args.quiet, **{k: getattr(args, k) for k in shape})
            c.up()
        except KeyboardInterrupt:
            print("prunex.minicluster: interrupted; cluster torn down", file=sys.stderr)
            return 130
        except MiniClusterError as e:
            print(f"prunex.minicluster: up failed: {e}", file=sys.stderr)
            return 1
        print(c.status())
        print('# client environment (eval "$(python -m prunex.minicluster env)"):')
        for k, v in c.env().items():
            print(f"export {k}={shlex.quote(v)}")
        return 0

    c = MiniCluster(args.dir)
    if args.cmd == "shape":
        try:
            c.reshape(args.inter_bw)
        except MiniClusterError as e:
            print(f"prunex.minicluster: shape: {e}", file=sys.stderr)
            return 1
        print(f"minicluster {c.dir}: node links at {args.inter_bw}")
        return 0
    if args.cmd == "down":
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # finish tearing down once started
        if args.all:
            gone = down_all(verbose=True)
            print("removed: " + (", ".join(gone) if gone else "nothing"))
            return 0
        try:
            removed = c.down()
        except MiniClusterError as e:
            print(f"prunex.minicluster: down: {e}", file=sys.stderr)
            return 1
        print(f"minicluster {c.dir}: " + ("removed" if removed else "nothing to remove"))
        return 0
    if args.cmd == "status":
        print(c.status())
        return 0 if c.is_up() else 3
    if args.cmd == "env":
        for k, v in c.env().items():
            print(f"export {k}={shlex.quote(v)}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
