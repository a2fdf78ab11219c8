"""A corpus on disk: its test nodes and their op marks, read statically (no import: on a machine
without an accelerator `import flag_gems` raises, so collection cannot be used to plan)."""

from __future__ import annotations

import ast
import difflib
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

import yaml

from .errors import UsageError

BUILTIN_MARKS = {
    "parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout",
    "tryfirst", "trylast",
}


@dataclass(frozen=True)
class TestNode:
    nodeid: str  # relative to the corpus root: benchmark/test_fft.py::test_perf_fft
    file: str  # benchmark/test_fft.py
    op: str  # first non-builtin mark (FlagGems' op id); the function name when unmarked
    marks: Tuple[str, ...]


def _mark_names(decorators: Iterable[ast.expr]) -> List[str]:
    names = []
    for dec in decorators:
        node = dec.func if isinstance(dec, ast.Call) else dec
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
        parts.reverse()
        if len(parts) >= 3 and parts[0] == "pytest" and parts[1] == "mark":
            names.append(parts[2])
        elif len(parts) == 2 and parts[0] == "mark":
            names.append(parts[1])
    return names


def _module_marks(tree: ast.Module) -> List[str]:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets
        ):
            values = stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
            return _mark_names(values)
    return []


def scan_file(root: Path, path: Path) -> List[TestNode]:
    rel = path.relative_to(root).as_posix()
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError:
        # Still plannable: the worker runs it and records the collection error as its status.
        return [TestNode(rel, rel, path.stem, ())]
    module_marks = _module_marks(tree)
    nodes = []

    def add(name: str, decorators, prefix: str = "", class_marks=()):
        marks = tuple(_mark_names(decorators)) + tuple(class_marks) + tuple(module_marks)
        op = next((m for m in marks if m not in BUILTIN_MARKS), name)
        nodes.append(TestNode(f"{rel}::{prefix}{name}", rel, op, marks))

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("test"):
            add(stmt.name, stmt.decorator_list)
        elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
            cmarks = _mark_names(stmt.decorator_list)
            for sub in stmt.body:
                if isinstance(sub, ast.FunctionDef) and sub.name.startswith("test"):
                    add(sub.name, sub.decorator_list, f"{stmt.name}::", cmarks)
    return nodes


class Corpus:
    def __init__(self, root: Path, test_dir: str = "benchmark"):
        self.root = Path(root).resolve()
        self.test_dir = test_dir
        base = self.root / test_dir
        if not base.is_dir():
            raise UsageError(
                f"corpus root '{self.root}' has no '{test_dir}/' folder of test files. Fix: point "
                "corpus.root (or FLAGGEMS_ROOT) at a FlagGems checkout holding benchmark/."
            )
        files = sorted(p for p in base.rglob("test_*.py") if "__pycache__" not in p.parts)
        self.nodes: List[TestNode] = [n for f in files for n in scan_file(self.root, f)]

    @property
    def ini(self) -> Optional[Path]:
        for name in ("pytest.ini", "tox.ini", "setup.cfg"):
            if (self.root / name).is_file():
                return self.root / name
        return None

    def ops(self) -> List[str]:
        return sorted({n.op for n in self.nodes})

    def select(self, ops: Sequence[str] = (), op_file: Optional[str] = None,
               test_node: Optional[str] = None) -> List[TestNode]:
        chosen = [k for k, v in (("ops", ops), ("op_file", op_file), ("test_node", test_node)) if v]
        if len(chosen) > 1:
            raise UsageError(
                f"choose one selection, not {' and '.join(chosen)}. Fix: keep one of ops=[...], "
                "op_file=..., test_node=..."
            )
        if test_node:
            return [self._node(test_node)]
        if op_file:
            return self._file(op_file)
        if ops:
            out: List[TestNode] = []
            for op in ops:
                if any(c in op for c in "*?["):  # a pattern: ops=['*norm*']
                    hits = [n for n in self.nodes if any(fnmatch.fnmatchcase(m, op) for m in (n.op,) + n.marks)]
                else:
                    hits = [n for n in self.nodes if op in n.marks or n.op == op]
                if not hits:
                    raise UsageError(
                        f"op '{op}' matches no test in {self.root / self.test_dir}."
                        f"{_close(op, self.ops())} Fix: ops=[<op mark>], see the op marks of the corpus."
                    )
                out += [n for n in hits if n not in out]
            return out
        return list(self.nodes)

    def _file(self, op_file: str) -> List[TestNode]:
        name = op_file.split("::")[0]
        candidates = {n.file for n in self.nodes}
        for f in sorted(candidates):
            if f == name or f == f"{self.test_dir}/{name}" or Path(f).name == name:
                return [n for n in self.nodes if n.file == f]
        raise UsageError(
            f"op_file '{op_file}' is not a test file of the corpus."
            f"{_close(Path(name).name, sorted(Path(c).name for c in candidates))} "
            f"Fix: op_file=<file under {self.test_dir}/>, e.g. op_file=test_fft.py."
        )

    def _node(self, test_node: str) -> TestNode:
        wanted = test_node.split("[")[0]
        if not wanted.startswith(f"{self.test_dir}/") and "::" in wanted:
            wanted = f"{self.test_dir}/{wanted}"
        for n in self.nodes:
            if n.nodeid == wanted:
                return n
        ids = [n.nodeid for n in self.nodes]
        raise UsageError(
            f"test_node '{test_node}' is not in the corpus.{_close(wanted, ids)} "
            "Fix: test_node=<file>::<test function>, e.g. benchmark/test_fft.py::test_perf_fft."
        )


def _close(word: str, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=3, cutoff=0.5)
    return f" Close matches: {', '.join(close)}." if close else ""


def check_shape_file(path: str) -> Path:
    """A shape-record file in FlagGems' core_shapes.yaml format, or a UsageError saying what's off."""
    p = Path(path).expanduser().resolve()
    fix = "Fix: shape.file=<yaml mapping op -> {shapes: [[...], ...]}> or shape=upstream."
    if not p.is_file():
        raise UsageError(f"shape file '{path}' does not exist. {fix}")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise UsageError(f"shape file '{path}' is not valid YAML ({str(e).splitlines()[0]}). {fix}")
    if not isinstance(data, dict) or not data:
        raise UsageError(f"shape file '{path}' must be a non-empty mapping of op names. {fix}")
    for op, entry in data.items():
        shapes = entry.get("shapes") if isinstance(entry, dict) else None
        if not isinstance(shapes, list) or not all(isinstance(s, (list, tuple)) for s in shapes):
            raise UsageError(f"shape file '{path}': entry '{op}' needs a list `shapes` of lists. {fix}")
    return p
