"""`python -m prunex.regime`, the command's path before the house was sorted into folders (issue 28):
the module is `prunex.cluster.regime`; this forwards to it so that the command keeps working."""

import sys

from prunex.cluster.regime import main

if __name__ == "__main__":
    sys.exit(main())
