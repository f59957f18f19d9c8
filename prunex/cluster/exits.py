"""How the command lines end on an error: one line on stderr and an exit code.

    python -m prunex.run --method nope   # error: unknown method 'nope'; known: ... (exit code 2)

`refuse` is the one place that turns an exception into that line: an interrupt (`prunex.cluster.interrupt`)
says how to resume and carries its own code (130 after SIGINT, 143 after SIGTERM); anything else is
`error: <message>` with the code its command gives that kind of exception (2: bad input, 3: a run or
results directory another job holds, 1: a failure).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from prunex.cluster.interrupt import Interrupted


def one_line(text: object) -> str:
    """`text` on one line: its non-blank lines, stripped, joined by "; " (a message that ends in a newline, or
    quotes a multi-line error, would otherwise break the one-line contract)."""
    return "; ".join(ln.strip() for ln in str(text).splitlines() if ln.strip())


def refuse(e: BaseException, codes: Mapping[type[BaseException], int]) -> int:
    """Print `e` as one line on stderr; return the code of the first type in `codes` it is an instance of
    (an `Interrupted`: its own)."""
    if isinstance(e, Interrupted):
        print(one_line(e), file=sys.stderr)
        return e.exit_code
    print(f"error: {one_line(e)}", file=sys.stderr)
    return next(code for kind, code in codes.items() if isinstance(e, kind))
