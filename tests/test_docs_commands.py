"""Every command that README.md and docs/ show names a module that exists and options it accepts (issue 28).

The commands are read from the pages: the lines of fenced code blocks (backslash continuations joined)
and inline code spans that start with `python -m MODULE` or `./run_all.sh`. For a module, its `--help`
runs in this process (`runpy`, as `python -m` would run it; the subcommand's help where the command
names one) and must exit 0 and list every `--option` the page passes; for `./run_all.sh`, its usage text
(`python -m experiments.run_all --help`, which it prints) must list every option. Running the commands
themselves is the job of the tests of each command: here a renamed module, a dropped option or a page that
was not updated fails.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import runpy
import shlex
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_OURS = {"venv", "pip"}  # `python -m venv`, `python -m pip`: Python's own


def _code_lines(text: str) -> list[str]:
    lines: list[str] = []
    fenced = False
    for raw in text.splitlines():
        if raw.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            if lines and lines[-1].endswith("\\"):
                lines[-1] = lines[-1][:-1] + " " + raw.strip()
            else:
                lines.append(raw.strip())
        else:
            lines += re.findall(r"`([^`]+)`", raw)
    return lines


def shown_commands() -> list[tuple[str, str]]:
    """(page, command) for every `python -m` / `./run_all.sh` command the pages show, comments cut."""
    found: list[tuple[str, str]] = []
    for page in PAGES:
        for line in _code_lines(page.read_text()):
            cmd = line.split(" #", 1)[0].strip()
            m = re.search(r"(?:^|&& |; |\$ )((?:python -m|\./run_all\.sh)\b.*)", cmd)
            if m:
                found.append((page.relative_to(ROOT).as_posix(), m.group(1).strip()))
    return found


def _options(tokens: list[str]) -> list[str]:
    return sorted({t.split("=", 1)[0] for t in tokens if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", t)})


def _tokens(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd)
    except ValueError:  # an unbalanced quote in a sketch of a command
        return cmd.split()


def _help(module: str, words: list[str]) -> tuple[int, str]:
    """(exit code, help text) of `python -m module *words --help`, run in this process."""
    out = io.StringIO()
    argv = sys.argv
    sys.argv = [module, *words, "--help"]
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), warnings.catch_warnings():
            # another test in this worker may have imported the module: runpy says so, then runs a fresh copy of
            # it as __main__, which is all this needs
            warnings.filterwarnings("ignore", "'.*' found in sys.modules after import", RuntimeWarning)
            runpy.run_module(module, run_name="__main__", alter_sys=False)
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv = argv
    return (0 if code is None else code if isinstance(code, int) else 1), out.getvalue()


@functools.cache
def module_commands() -> dict[tuple[str, tuple[str, ...]], set[str]]:
    """(module, subcommand words) -> the options the pages pass to it."""
    out: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for _, cmd in shown_commands():
        tokens = _tokens(cmd)
        if tokens[:2] != ["python", "-m"] or len(tokens) < 3:
            continue
        module = tokens[2]
        if module in NOT_OURS or not re.fullmatch(r"[a-z_][a-z0-9_.]*", module):  # experiments.NAME: a pattern
            continue
        sub = tuple(t for t in tokens[3:4] if re.fullmatch(r"[a-z][a-z_-]*", t))  # a subcommand or nothing
        out.setdefault((module, sub), set()).update(_options(tokens[3:]))
    return out


def test_the_pages_show_commands() -> None:
    cmds = [c for _, c in shown_commands()]
    assert any(c.startswith("./run_all.sh") for c in cmds) and any(c.startswith("python -m prunex.run") for c in cmds)
    assert ("prunex.perfmodel", ("project",)) in module_commands()


@pytest.mark.parametrize(
    "module,sub", sorted(module_commands()), ids=lambda v: " ".join(v) if isinstance(v, tuple) else v
)
def test_each_module_command_exists_and_takes_the_options_shown(module: str, sub: tuple[str, ...]) -> None:
    options = module_commands()[(module, sub)]
    code, text = _help(module, list(sub))
    if code != 0 and sub:  # the word was a positional argument (`prunex.pruning.export RUN`), not a subcommand
        code, text = _help(module, [])
    assert code == 0, f"python -m {module} {' '.join(sub)} --help: exit {code}\n{text[-1500:]}"
    # named as the user types it, not as its file (2026-12-08: "usage: compare_runs.py", "usage: startup.py")
    named = ("usage: python -m ", "usage: ./run_all.sh ")  # experiments.run_all: ./run_all.sh hands over to it
    assert any(n in text for n in named), f"python -m {module} --help: {text.splitlines()[:1]}"
    missing = sorted(o for o in options if o not in text)
    assert not missing, f"python -m {module} {' '.join(sub)}: the pages pass {missing}, which its --help does not list"


def test_run_all_takes_the_options_shown() -> None:
    code, usage = _help("experiments.run_all", [])  # ./run_all.sh --help prints this module's usage
    assert code == 0, usage
    shown = {o for _, c in shown_commands() if c.startswith("./run_all.sh") for o in _options(_tokens(c))}
    assert shown and not sorted(o for o in shown if o not in usage)


def python_blocks() -> list[tuple[str, str]]:
    """(page, source) of every fenced ```python block the pages show."""
    found = []
    for page in PAGES:
        for block in re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M):
            found.append((page.relative_to(ROOT).as_posix(), block))
    return found


def test_each_python_block_compiles_and_its_names_and_keywords_exist() -> None:
    """The library's Python API as the pages show it (docs/running.md, "From Python"): each block compiles, what
    it imports exists, and each keyword it passes to a class it imports is one of that class's fields or parameters.
    Running the block is a training run, left to the tests of `launch`; here a renamed function or field fails."""
    import ast
    import importlib
    import inspect

    blocks = python_blocks()
    assert any("launch(" in source for _, source in blocks)
    for page, source in blocks:
        tree = ast.parse(source, filename=page)
        imported: dict[str, object] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{page}: {node.module} has no {alias.name}"
                    imported[alias.asname or alias.name] = getattr(module, alias.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported:
                accepted = inspect.signature(imported[node.func.id]).parameters  # type: ignore[arg-type]
                unknown = [k.arg for k in node.keywords if k.arg not in accepted]
                assert not unknown, f"{page}: {node.func.id}() takes no {unknown}"
