"""`python -m prunex.export`, the command's path before the house was sorted into folders (issue 28):
the module is `prunex.pruning.export`; this forwards to it so that the command keeps working."""

import sys

from prunex.pruning.export import main

if __name__ == "__main__":
    sys.exit(main())
