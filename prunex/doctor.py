"""`python -m prunex.doctor`, the preflight check's path before issue 28: the command reads the
experiments' profiles, so it is `python -m experiments.doctor` (the checks: `prunex.cluster.doctor`)."""

import sys

from prunex.cluster.doctor import MOVED

if __name__ == "__main__":
    print(MOVED, file=sys.stderr)
    sys.exit(2)
