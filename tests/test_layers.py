"""The house's layers (issue 28): the project's own imports form no circle, and no layer imports one above it.

Read from the source (ast), not by importing: every `import` and `from ... import` of a project module,
at module level or inside a function (a lazy import still ties the two modules together), except those
under `if TYPE_CHECKING:` (annotations only, never executed). `from package import name` depends on the
submodule `package.name` where there is one, else on the package.
"""

from __future__ import annotations

import ast
import importlib
import io
import runpy
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the packages from the bottom up, and what each may import besides itself
MAY_IMPORT = {
    "prunex": set(),  # the library: never the suite built on it
    "experiments": {"prunex"},  # one definition per paper result
    "analysis": {"prunex"},  # logs in, figures and the report out
    "benchmarks": {"prunex", "experiments", "analysis"},  # recipes that measure, from the whole house
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in MAY_IMPORT for p in sorted((ROOT / pkg).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of `tree` outside `if TYPE_CHECKING:` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The project module `name` is (or lies in), None for a module outside the project."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the package, `level - 1` packages up
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                owner = _owner(t, modules)
                if owner is not None and owner != mod:
                    graph[mod].add(owner)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_graph_sees_lazy_imports_and_skips_annotations_only() -> None:
    graph = import_graph()
    assert "prunex.cluster.launch" in graph["prunex.bench.exchange"]  # imported inside a function
    assert "prunex.comm.native" in graph["prunex.comm.shrink"]  # `from prunex.comm import native`: the submodule
    assert "analysis.measurements" not in graph["analysis.claims.base"]  # only under `if TYPE_CHECKING:`
    assert "analysis.measurements" in graph["analysis.claims.volume"]
    assert "analysis.claims.volume" in graph["analysis.claims.table"]


def test_the_project_imports_form_no_circle() -> None:
    assert circles(import_graph()) == []


def test_a_circle_is_found() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_layer_imports_one_above_it() -> None:
    upward = sorted(
        f"{mod} -> {dep}"
        for mod, deps in import_graph().items()
        for dep in deps
        if dep.split(".")[0] != mod.split(".")[0] and dep.split(".")[0] not in MAY_IMPORT[mod.split(".")[0]]
    )
    assert upward == []


@pytest.mark.parametrize(
    "old,new", [("data", "training.data"), ("export", "pruning.export"), ("regime", "cluster.regime")]
)
def test_the_old_command_paths_still_run(old: str, new: str, capsys: pytest.CaptureFixture) -> None:
    """`python -m prunex.data download ...` and the like, typed before the folders: they forward."""
    argv, sys.argv = sys.argv, [f"prunex.{old}", "--help"]
    try:
        with pytest.raises(SystemExit) as e:
            runpy.run_module(f"prunex.{old}", run_name="__main__", alter_sys=True)
    finally:
        sys.argv = argv
    assert e.value.code == 0 and "usage: python -m prunex." in capsys.readouterr().out
    assert importlib.import_module(f"prunex.{old}").main is importlib.import_module(f"prunex.{new}").main


def test_torchrun_s_old_path_runs_the_trainer() -> None:
    from prunex import train
    from prunex.training import train as trainer

    assert train.main is trainer.main


def _comment_lines(source: str) -> tuple[set[int], set[int]]:
    """(lines that carry a comment, lines that are nothing but a comment), read with `tokenize`."""
    carry: set[int] = set()
    alone: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            carry.add(tok.start[0])
            if not tok.line[: tok.start[1]].strip():
                alone.add(tok.start[0])
    return carry, alone


def _is_project_import(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in MAY_IMPORT
    return any(a.name.split(".")[0] in MAY_IMPORT for a in node.names)


def test_every_import_inside_a_function_says_why() -> None:
    """Issue 28: a project module imported inside a function (not at the top of the module) is there for a
    reason: an optional heavy dependency kept off the module's load (torch, torchvision, pandas), a command's
    lazy start, a job's own process, an import circle. The reason is written on the import's first line or
    in a comment line right above it."""
    silent = []
    for mod, path in _modules().items():
        source = path.read_text()
        tree = ast.parse(source, str(path))
        carry, alone = _comment_lines(source)
        inside = {
            node
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in _imports(fn)
            if _is_project_import(node)
        }
        for node in sorted(inside, key=lambda n: n.lineno):
            if node.lineno not in carry and node.lineno - 1 not in alone:
                silent.append(f"{path.relative_to(ROOT)}:{node.lineno} ({mod}): {ast.unparse(node)}")
    assert silent == [], "imports inside functions without a comment saying why:\n" + "\n".join(silent)
