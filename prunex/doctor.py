"""`python -m prunex.doctor`, the preflight check's path before issue 28: the command reads the
experiments' profiles, so it is `python -m experiments.doctor` (the checks: `prunex.cluster.doctor`)."""

import sys

if __name__ == "__main__":
    print("error: the preflight check is `python -m experiments.doctor` (it reads the profiles)", file=sys.stderr)
    sys.exit(2)
