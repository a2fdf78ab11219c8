"""A corpus on disk: its test nodes and their op marks, read statically (no import: on a machine
without an accelerator `import flag_gems` raises, so collection cannot be used to plan)."""

from __future__ import annotations

import ast
import difflib
import fnmatch
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import yaml

from zlbench.errors import UsageError
from zlbench.results.schema import BUILTIN_MARKS



@dataclass(frozen=True)
class TestNode:
    nodeid: str  # relative to the corpus root: benchmark/test_fft.py::test_perf_fft
    file: str  # benchmark/test_fft.py
    op: str  # first non-builtin mark (FlagGems' op id); the function name when unmarked
    marks: Tuple[str, ...]  # the function's, its class', its module's, then its parametrize cases'
    # Selected through marks set on pytest.param cases: only the cases carrying one of these run
    # (as with `pytest -m bmm`); empty: the whole function.
    only_marks: Tuple[str, ...] = ()
    case_marks: Tuple[str, ...] = ()  # the marks set on pytest.param cases (part of marks)


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


def _case_marks(decorators: Iterable[ast.expr]) -> List[str]:
    """Marks set on the cases of @pytest.mark.parametrize lists: pytest.param(..., marks=...)."""
    names: List[str] = []
    for dec in decorators:
        if not (isinstance(dec, ast.Call) and _mark_names([dec]) == ["parametrize"]):
            continue
        for case in ast.walk(dec):
            if isinstance(case, ast.Call) and isinstance(case.func, ast.Attribute) and case.func.attr == "param":
                for kw in case.keywords:
                    if kw.arg == "marks":
                        value = kw.value
                        marks = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
                        names += [m for m in _mark_names(marks) if m not in names]
    return names


def _module_marks(tree: ast.Module) -> List[str]:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets
        ):
            values = stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
            return _mark_names(values)
    return []


def scan_file(root: Path, path: Path, op_names: Optional[Set[str]] = None,
              unparsed: Optional[Dict[str, str]] = None) -> List[TestNode]:
    """The file's test nodes; adds the op names it passes as `op_name="..."` literals to op_names
    (FlagGems looks shapes up by a Benchmark's op_name, which need not be a mark), and a file
    Python cannot parse to unparsed (file -> the error)."""
    rel = path.relative_to(root).as_posix()
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as e:
        if unparsed is not None:
            unparsed[rel] = f"{type(e).__name__}: {e.msg}, line {e.lineno}"
        # Still plannable: the worker runs it and records the collection error as its status.
        return [TestNode(rel, rel, path.stem, ())]
    if op_names is not None:
        op_names.update(k.value.value for k in ast.walk(tree) if isinstance(k, ast.keyword)
                        and k.arg == "op_name" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str))
    module_marks = _module_marks(tree)
    nodes = []

    def add(name: str, decorators, prefix: str = "", class_marks=()):
        marks = tuple(_mark_names(decorators)) + tuple(class_marks) + tuple(module_marks)
        cases = tuple(m for m in _case_marks(decorators) if m not in marks)
        op = next((m for m in marks + cases if m not in BUILTIN_MARKS), name)
        nodes.append(TestNode(f"{rel}::{prefix}{name}", rel, op, marks + cases, case_marks=cases))

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
        self.op_names: Set[str] = set()  # Benchmark op_name literals
        self.unparsed: Dict[str, str] = {}  # files Python cannot parse: their marks are unknown
        self.nodes: List[TestNode] = [n for f in files for n in scan_file(self.root, f, self.op_names, self.unparsed)]

    @property
    def ini(self) -> Optional[Path]:
        for name in ("pytest.ini", "tox.ini", "setup.cfg"):
            if (self.root / name).is_file():
                return self.root / name
        return None

    def ops(self) -> List[str]:
        return sorted({n.op for n in self.nodes})

    def shape_names(self) -> Set[str]:
        """Names a shape file may key an op's shapes by: op marks and Benchmark op names."""
        return {n.op for n in self.nodes} | {m for n in self.nodes for m in n.marks
                                             if m not in BUILTIN_MARKS} | self.op_names

    def select(self, ops: Sequence[str] = (), op_file: Optional[str] = None,
               test_node: Optional[str] = None) -> List[TestNode]:
        """One selection: ops, op_file, both (the ops' tests in that file: the old runner's OP with
        OP_FILE), or test_node alone."""
        if test_node and (ops or op_file):
            other = " and ".join(k for k, v in (("ops", ops), ("op_file", op_file)) if v)
            raise UsageError(
                f"choose one selection, not test_node and {other}. Fix: keep test_node=... alone, or "
                "ops=[...] and/or op_file=..."
            )
        if test_node:
            return [self._node(test_node)]
        pool = self._file(op_file) if op_file else self.nodes
        chosen: Dict[str, TestNode] = {}
        for op in ops:
            for n in self._matching(op, pool, op_file):
                chosen[n.nodeid] = _narrowed(chosen.get(n.nodeid), n, op)
        return list(chosen.values()) if ops else list(pool)

    def matches(self, op: str, node: TestNode) -> bool:
        """Whether an op mark (or pattern: ops=['*norm*']) selects this node, as `pytest -m` would."""
        if any(c in op for c in "*?["):
            return any(fnmatch.fnmatchcase(m, op) for m in (node.op,) + node.marks)
        return op in node.marks or node.op == op

    def _matching(self, op: str, pool: List[TestNode], op_file: Optional[str]) -> List[TestNode]:
        """The tests of one op mark (or pattern: ops=['*norm*']) among pool; none is an error."""
        hits = [n for n in pool if self.matches(op, n)]
        if not hits and op_file:
            file_ops = sorted({n.op for n in pool})
            raise UsageError(
                f"op '{op}' has no test in {pool[0].file}; its ops: {', '.join(file_ops)}. "
                f"Fix: ops=[<one of them>], or drop op_file={op_file} to find '{op}' in every file."
            )
        if not hits and not self.ops():
            raise UsageError(
                f"op '{op}' matches no test in {self.root / self.test_dir}: it holds no test at all (no "
                "test_*.py that pytest collects). Fix: corpus.root=<the corpus checkout> (corpus.test_dir="
                "<its benchmark folder> where it is not `benchmark`).")
        if not hits and self.unparsed:
            # Its test may be in a file with a syntax error: "no test" alone sent the user hunting marks.
            broken = "; ".join(f"{f} ({e})" for f, e in sorted(self.unparsed.items())[:3])
            raise UsageError(
                f"op '{op}' matches no test in {self.root / self.test_dir}, and {len(self.unparsed)} test file(s) "
                f"there cannot be parsed, so their op marks are unknown: {broken}. Fix: correct the file, or "
                f"op_file=<it> to run it and record its collection error.")
        if not hits:
            raise UsageError(
                f"op '{op}' matches no test in {self.root / self.test_dir}."
                f"{_close(op, self.ops())} Fix: ops=[<op mark>]: "
                + (f"its op marks are {', '.join(self.ops())}." if len(self.ops()) <= 30 else
                   f"{len(self.ops())} op marks; `python -m zlbench dry_run=true` (every op) lists each test and "
                   "its op, op_file=<file> narrows to one file's.")
            )
        return hits

    def _file(self, op_file: str) -> List[TestNode]:
        name = op_file.split("::")[0]
        candidates = {n.file for n in self.nodes}
        for f in sorted(candidates):
            if f == name or f == f"{self.test_dir}/{name}" or Path(f).name == name:
                return [n for n in self.nodes if n.file == f]
        raise UsageError(
            f"op_file '{op_file}' is not a test file of the corpus."
            f"{_close(Path(name).name, sorted(Path(c).name for c in candidates))} "
            f"Fix: op_file=<file under {self.test_dir}/>, "
            f"e.g. op_file={Path(min(candidates, default='test_fft.py')).name}."
        )

    def _node(self, test_node: str) -> TestNode:
        wanted, _, case = test_node.partition("[")
        if not wanted.startswith(f"{self.test_dir}/") and "::" in wanted:
            wanted = f"{self.test_dir}/{wanted}"
        for n in self.nodes:
            if n.nodeid == wanted and case:
                # It ran every case of the function, silently (a parametrize id copied from pytest).
                marks = f" (its cases' op marks: {', '.join(n.case_marks)}: ops=[<mark>] runs one)" \
                    if n.case_marks else ""
                raise UsageError(f"test_node '{test_node}' names one case of {wanted}: zlbench measures a test "
                                 f"function whole, its cases chosen by dtypes= and the shape mode{marks}. "
                                 f"Fix: test_node='{wanted}'.")
            if n.nodeid == wanted:
                return n
        ids = [n.nodeid for n in self.nodes]
        raise UsageError(
            f"test_node '{test_node}' is not in the corpus.{_close(wanted, ids)} "
            f"Fix: test_node=<file>::<test function>, e.g. {min(ids, default='benchmark/test_fft.py::test_perf_fft')}."
        )


def _narrowed(earlier: Optional[TestNode], node: TestNode, op: str) -> TestNode:
    """The node as selected by op (and by the ops that selected it before): a function matched
    only through its cases' marks runs only those cases, and takes the first such mark as its op."""
    whole = [m for m in node.marks if m not in node.case_marks]
    wanted = [m for m in node.case_marks if fnmatch.fnmatchcase(m, op)]
    if not wanted or any(fnmatch.fnmatchcase(m, op) for m in whole) or (earlier and not earlier.only_marks):
        return replace(node, only_marks=())
    if earlier is not None:
        wanted = list(earlier.only_marks) + [m for m in wanted if m not in earlier.only_marks]
    return replace(node, op=wanted[0], only_marks=tuple(wanted))


def _close(word: str, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=3, cutoff=0.5)
    return f" Close matches: {', '.join(close)}." if close else ""


def _did_you_mean(word: str, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


# FlagGems reads `shapes` and `shape_desc`; the demo corpus adds `comprehensive` (--level comprehensive).
SHAPE_ENTRY_KEYS = ("shapes", "shape_desc", "comprehensive")
SHAPE_FIX = "Fix: shape.file=<yaml mapping op -> {shapes: [[...], ...]}> or shape=upstream."
MAX_SHAPE_PROBLEMS = 20


def check_shape_file(path: str, known_ops: Optional[Iterable[str]] = None) -> Path:
    """A shape-record file in FlagGems' core_shapes.yaml format, checked whole before anything runs;
    a UsageError names every problem with its file and line. With known_ops (the corpus' op marks
    and op names) an entry named like no op is a problem too; capitalized names (Benchmark classes)
    and anchors that other entries merge (`<<: *name`) are not op names."""
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise UsageError(f"shape file '{path}' does not exist. {SHAPE_FIX}")
    loader = yaml.SafeLoader(p.read_text(encoding="utf-8"))
    try:
        problems = _ShapeFile(path, loader).problems(None if known_ops is None else set(known_ops))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UsageError(f"shape file {path}{at} is not valid YAML ({problem}). {SHAPE_FIX}")
    finally:
        loader.dispose()
    if problems:
        more = len(problems) - MAX_SHAPE_PROBLEMS
        raise UsageError("\n".join(problems[:MAX_SHAPE_PROBLEMS] + [f"... and {more} more"] * (more > 0)))
    return p


class _ShapeFile:
    """Walks the YAML nodes (they carry the line numbers) next to the values they load as."""

    def __init__(self, path: str, loader: yaml.SafeLoader):
        self.path = path
        self.loader = loader

    def at(self, node: yaml.Node) -> str:
        return f"shape file {self.path}:{node.start_mark.line + 1}"

    def value(self, node: yaml.Node):
        return self.loader.construct_object(node, deep=True)

    def fields(self, node: yaml.MappingNode) -> Dict[str, Tuple[yaml.Node, yaml.Node]]:
        """key -> (key node, value node); the last of equal keys wins, as in the loaded data."""
        return {str(self.value(k)): (k, v) for k, v in node.value}

    def problems(self, known: Optional[Set[str]]) -> List[str]:
        root = self.loader.get_single_node()
        aliased = _aliased_nodes(root)
        # Loading flattens `<<` merges into the nodes: they then hold what each entry really holds.
        data = self.value(root) if root is not None else None
        if not isinstance(data, dict) or not data:
            return [f"shape file '{self.path}' must be a non-empty mapping of op names. {SHAPE_FIX}"]
        out: List[str] = []
        for name, (key, entry) in self.fields(root).items():
            if known is not None and not name[:1].isupper() and id(entry) not in aliased and name not in known:
                out.append(f"{self.at(key)}: '{name}' is neither an op of the corpus nor a Benchmark class "
                           f"name{_did_you_mean(name, sorted(known))}. Fix: rename it to an op mark of the "
                           "corpus (or a Benchmark class name), or delete the entry.")
            out += self.entry_problems(name, key, entry)
        return out

    def entry_problems(self, name: str, key: yaml.Node, entry: yaml.Node) -> List[str]:
        needs = f"{self.at(key)}: entry '{name}' needs a list `shapes` of lists, e.g. shapes: [[64, 64]]. {SHAPE_FIX}"
        if not isinstance(entry, yaml.MappingNode):
            return [needs]
        fields = self.fields(entry)
        out = [f"{self.at(k)}: entry '{name}' has an unknown key '{field}'{_did_you_mean(field, SHAPE_ENTRY_KEYS)}. "
               f"Fix: use {', '.join(SHAPE_ENTRY_KEYS)}." for field, (k, _) in fields.items()
               if field not in SHAPE_ENTRY_KEYS]
        if "shapes" not in fields:
            return out + [needs]
        for field in ("shapes", "comprehensive"):
            if field in fields:
                out += self.shape_list_problems(name, field, *fields[field])
        return out

    def shape_list_problems(self, name: str, field: str, key: yaml.Node, node: yaml.Node) -> List[str]:
        if not isinstance(node, yaml.SequenceNode) or not all(isinstance(s, yaml.SequenceNode) for s in node.value):
            return [f"{self.at(key)}: entry '{name}' needs a list `{field}` of lists, e.g. {field}: [[64, 64]]. "
                    f"{SHAPE_FIX}"]
        out = []
        for item in node.value:
            shape = self.value(item)
            bad = _bad_dimension(shape) if shape else "is empty"
            if bad:
                out.append(f"{self.at(item)}: op '{name}': shape {shape} {bad}. Fix: give every dimension as "
                           "an integer >= 0, or delete that shape.")
        return out


def _aliased_nodes(root: Optional[yaml.Node]) -> Set[int]:
    """ids of the nodes an alias (*name) reuses: an anchored entry is a template for others."""
    seen: Set[int] = set()
    aliased: Set[int] = set()
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            aliased.add(id(node))
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack += [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return aliased


def _bad_dimension(shape: list) -> Optional[str]:
    """What is wrong with a shape's dimensions, if anything. 0 is allowed: a real size (an empty
    tensor: FlagGems' model shape files have [0, 3584]) or a parameter (a convolution's padding).
    In a shape holding lists ([[32, 384], -1, false]: input shape, dim, keepdim) the values beside
    the lists are parameters."""
    def walk(xs, numbers_are_dims):
        for x in xs:
            if isinstance(x, list):
                found = walk(x, True)
            elif numbers_are_dims and (x is None or isinstance(x, (str, dict))):
                found = f"has a dimension that is not a number ({x!r})"
            elif numbers_are_dims and isinstance(x, int) and not isinstance(x, bool) and x < 0:
                found = f"has a negative dimension ({x})"
            else:
                found = None
            if found:
                return found
        return None

    return walk(shape, not any(isinstance(x, list) for x in shape))
