"""The package's structure, read from its source (nothing of it is imported or run).

    python tools/structure.py circles                                  # circles of files that import each other
    python tools/structure.py faces                                    # imports of a name from where it is not made
    python tools/structure.py walk gpt1/commands/finetune.py:main:cfg  # the files a parameter passes through
    python tools/structure.py size                                     # the package's lines, its longest modules

circles: every import counts (at a file's top, inside a function, under ``if TYPE_CHECKING``) and so does a module
that a file loads through ``importlib.import_module`` (or ``__import__``) by a string it writes out, in the call or
in a table. ``from gpt1.a import b`` is an import of ``gpt1.a.b`` when that is a module, else of ``gpt1.a``.

faces: ``from gpt1.x import name`` in gpt1/, tests/, experiments/ and tools/, where ``gpt1.x`` does not define
``name`` (it imports it from elsewhere, or resolves it in a module ``__getattr__``): the import should name the
module that defines it. ``gpt1.api``, the library's lazy face, is the one module allowed to hand names on.

walk: follows a parameter through the calls that pass it, or a part of it (``cfg.task``, a value computed from it,
an object built from it and its methods), from the function it enters, in the order the code is written, each
function once; prints the files in the order entered and counts the returns to a file already left.

size: the lines of every module of the package (as ``wc -l`` counts them), in all and the five longest.

Exit status: 0, or 1 when ``circles`` finds a circle or ``faces`` an import through a face.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "gpt1"
LAZY_FACES = {"gpt1.api"}
"""Modules that may hand names on (``__getattr__``): the library's face."""
READERS = ("gpt1", "tests", "experiments", "tools")
"""The folders whose imports ``faces`` checks."""


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of the package."""
    modules = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def size(root: Path = ROOT) -> dict[str, int]:
    """Each module's file (relative to ``root``) -> its lines, the longest first."""
    lines = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in module_files(root).values()}
    return dict(sorted(lines.items(), key=lambda item: -item[1]))


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _absolute(node: ast.ImportFrom, name: str, path: Path) -> str:
    """The module an ``ImportFrom`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = _package_of(name, path).split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _within(target: str, modules: dict[str, Path]) -> Optional[str]:
    """The longest prefix of ``target`` that is a module of the package, or None."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


def _loads_by_name(tree: ast.AST) -> bool:
    """Whether the file calls ``import_module`` or ``__import__``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if called in ("import_module", "__import__"):
                return True
    return False


@dataclass
class Edge:
    source: str
    target: str
    line: int
    how: str


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """Every import of a module of the package by module ``name`` (file ``path``)."""
    tree = ast.parse(path.read_text(), str(path))
    edges = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _within(alias.name, modules)
                if target:
                    edges.append(Edge(name, target, node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, name, path)
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else _within(base, modules)
                if target:
                    edges.append(Edge(name, target, node.lineno, f"from {base} import {alias.name}"))
    if _loads_by_name(tree):  # a module loaded by a string the file writes out: in the call or in a table
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules:
                edges.append(Edge(name, node.value, node.lineno, f"import_module({node.value!r})"))
    return [e for e in edges if e.target != name]


def circles(root: Path = ROOT) -> list[list[Edge]]:
    """Each circle of modules that import each other (a strongly connected component of the import graph), as the
    imports between its modules."""
    modules = module_files(root)
    edges = [e for name, path in modules.items() for e in imports_of(name, path, modules)]
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for e in edges:
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(set(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [[e for e in edges if e.source in c and e.target in c] for c in found]


def _defined(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level (not those it imports, nor those its ``__getattr__`` finds)."""
    names: set[str] = set()

    def collect(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            for target, _ in _bindings(node):
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            for block in ("body", "orelse", "finalbody", "handlers"):
                if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.ExceptHandler)):
                    collect(getattr(node, block, []))

    collect(tree.body)
    return names


def _exists(name: str, modules: dict[str, Path]) -> bool:
    return name in modules or name == f"{PACKAGE}.conf" or name.startswith(f"{PACKAGE}.conf.")


def faces(root: Path = ROOT) -> list[str]:
    """``path:line: from X import name`` for each import of a name from a package module that does not define it."""
    modules = module_files(root)
    defined = {name: _defined(ast.parse(path.read_text())) for name, path in modules.items()}
    found = []
    files = [p for folder in READERS for p in sorted((root / folder).rglob("*.py")) if ".venv" not in p.parts]
    for path in files:
        rel = path.relative_to(root)
        parts = rel.with_suffix("").parts
        here = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                gone = [a.name for a in node.names if a.name.startswith(f"{PACKAGE}.") and not _exists(a.name, modules)]
                found += [f"{rel}:{node.lineno}: import {name} (no such module)" for name in gone]
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _absolute(node, here, path)
            if base.startswith(f"{PACKAGE}.") and not _exists(base, modules):
                found.append(f"{rel}:{node.lineno}: from {base} import ... (no such module)")
            if base not in modules or base in LAZY_FACES:
                continue
            names = defined[base]
            for alias in node.names:
                if f"{base}.{alias.name}" in modules or alias.name in names:
                    continue
                found.append(f"{rel}:{node.lineno}: from {base} import {alias.name}")
    return found


# -- the walk -----------------------------------------------------------------------------------------------------


@dataclass
class Function:
    module: str
    node: ast.FunctionDef
    cls: Optional[ClassInfo] = None

    @property
    def name(self) -> str:
        return f"{self.cls.name}.{self.node.name}" if self.cls else self.node.name

    def params(self, bound: bool) -> list[str]:
        """Positional parameters, the first dropped when the call binds it (self, cls)."""
        args = self.node.args
        names = [a.arg for a in [*args.posonlyargs, *args.args]]
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in self.node.decorator_list)
        return names[1:] if bound and self.cls is not None and not static else names


@dataclass
class ClassInfo:
    module: str
    name: str
    node: ast.ClassDef
    methods: dict[str, Function] = field(default_factory=dict)
    bases: list[str] = field(default_factory=list)
    carried: set[str] = field(default_factory=set)
    """The attributes of its objects that hold the parameter (or a part of it)."""


@dataclass
class ModuleInfo:
    name: str
    path: Path
    functions: dict[str, Function] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    bindings: dict[str, tuple[str, Optional[str]]] = field(default_factory=dict)
    """A name imported here -> (module, attribute there), or (module, None) for a module."""


class House:
    """Every module's functions, classes and imports, to resolve the calls the walk meets."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        self.files = module_files(root)
        self.modules: dict[str, ModuleInfo] = {}
        for name, path in self.files.items():
            tree = ast.parse(path.read_text(), str(path))
            info = ModuleInfo(name, path)
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    info.functions[node.name] = Function(name, node)
                elif isinstance(node, ast.ClassDef):
                    cls = ClassInfo(name, node.name, node, bases=[ast.unparse(b) for b in node.bases])
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            cls.methods[item.name] = Function(name, item, cls)
                    info.classes[node.name] = cls
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.asname:
                            info.bindings[alias.asname] = (alias.name, None)
                        else:
                            info.bindings[alias.name.split(".")[0]] = (alias.name.split(".")[0], None)
                elif isinstance(node, ast.ImportFrom):
                    base = _absolute(node, name, path)
                    for alias in node.names:
                        sub = f"{base}.{alias.name}"
                        bound = (sub, None) if sub in self.files else (base, alias.name)
                        info.bindings[alias.asname or alias.name] = bound
            self.modules[name] = info

    def lookup(self, module: str, name: str, seen: int = 0) -> Optional[Function | ClassInfo]:
        """What ``module.name`` is, following imports to where it is defined."""
        info = self.modules.get(module)
        if info is None or seen > 10:
            return None
        if name in info.functions:
            return info.functions[name]
        if name in info.classes:
            return info.classes[name]
        if name in info.bindings:
            target, attr = info.bindings[name]
            return self.lookup(target, attr, seen + 1) if attr else None
        return None

    def method(self, cls: ClassInfo, name: str) -> Optional[Function]:
        """``cls``'s method ``name``, its own or a base's (bases of the package only)."""
        if name in cls.methods:
            return cls.methods[name]
        for base in cls.bases:
            found = self.resolve_name(cls.module, base)
            if isinstance(found, ClassInfo):
                method = self.method(found, name)
                if method:
                    return method
        return None

    def resolve_name(self, module: str, dotted: str) -> Optional[Function | ClassInfo]:
        head, _, rest = dotted.partition(".")
        found = self.lookup(module, head)
        if found is None and head in self.modules[module].bindings:
            target, attr = self.modules[module].bindings[head]
            if attr is None and rest:  # a module: mod.func
                return self.lookup(f"{target}.{rest.rpartition('.')[0]}".rstrip("."), rest.rpartition(".")[2])
        if isinstance(found, ClassInfo) and rest:
            return self.method(found, rest)
        return found

    def relative(self, module: str) -> str:
        return str(self.files[module].relative_to(self.root))


@dataclass
class Trip:
    house: House
    stops: int = 400
    events: list[tuple[str, str]] = field(default_factory=list)
    """(file, function) of each function entered, in order."""
    walked: set = field(default_factory=set)

    def enter(self, fn: Function, carried: set[str], bound_cls: Optional[ClassInfo] = None) -> None:
        if len(self.events) >= self.stops:
            return
        key = (fn.module, fn.name, frozenset(carried), frozenset(fn.cls.carried) if fn.cls else None)
        if key in self.walked:
            return  # a function already walked with the same parts: nothing new to see there
        self.walked.add(key)
        self.events.append((self.house.relative(fn.module), fn.name))
        Scope(self, fn, set(carried)).run()


class Scope:
    """One function's body, walked with the names that carry the parameter."""

    def __init__(self, trip: Trip, fn: Function, carried: set[str]) -> None:
        self.trip, self.house, self.fn = trip, trip.house, fn
        self.carried = carried
        self.types: dict[str, ClassInfo] = {}
        for arg in [*fn.node.args.posonlyargs, *fn.node.args.args, *fn.node.args.kwonlyargs]:
            if arg.annotation is not None:
                found = self.house.resolve_name(fn.module, ast.unparse(arg.annotation).strip("'\""))
                if isinstance(found, ClassInfo):
                    self.types[arg.arg] = found

    def holds(self, expr: Optional[ast.AST]) -> bool:
        """Whether ``expr`` holds the parameter or a part of it."""
        if expr is None:
            return False
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id in self.carried:
                return True
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and self.fn.cls is not None
                and node.attr in self.fn.cls.carried
            ):
                return True
        return False

    def run(self) -> None:
        for stmt in self.fn.node.body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # run when called, not here
        for call in _calls(stmt):
            self.call(call)
        for target, value in _bindings(stmt):
            self.assign(target, self.holds(value), self.built(value))
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                self.statement(child)
            elif isinstance(child, ast.ExceptHandler):
                for s in child.body:
                    self.statement(s)

    def built(self, value: Optional[ast.AST]) -> Optional[ClassInfo]:
        if isinstance(value, ast.Call):
            found = self.house.resolve_name(self.fn.module, ast.unparse(value.func)) if _dotted(value.func) else None
            return found if isinstance(found, ClassInfo) else None
        return None

    def assign(self, target: ast.AST, holds: bool, built: Optional[ClassInfo]) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                if holds:
                    self.carried.add(node.id)
                if built is not None:
                    self.types[node.id] = built
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and self.fn.cls is not None
                and holds
            ):
                self.fn.cls.carried.add(node.attr)

    def callee(self, call: ast.Call) -> tuple[Optional[Function], bool, bool]:
        """(the function called, whether the call binds its first parameter, whether its receiver carries me)."""
        f = call.func
        if isinstance(f, ast.Name):
            found = self.house.lookup(self.fn.module, f.id)
            if isinstance(found, ClassInfo):
                return self.house.method(found, "__init__"), True, False
            return found, False, False
        if not isinstance(f, ast.Attribute):
            return None, False, False
        receiver = f.value
        if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super":
            cls = self.fn.cls
            for base in cls.bases if cls else []:
                found = self.house.resolve_name(self.fn.module, base)
                if isinstance(found, ClassInfo) and self.house.method(found, f.attr):
                    return self.house.method(found, f.attr), True, False
            return None, False, False
        if isinstance(receiver, ast.Name):
            if receiver.id == "self" and self.fn.cls is not None:
                method = self.house.method(self.fn.cls, f.attr)
                reads = method is not None and any(
                    isinstance(n, ast.Attribute) and n.attr in self.fn.cls.carried for n in ast.walk(method.node)
                )
                return method, True, reads
            if receiver.id in self.types:
                return self.house.method(self.types[receiver.id], f.attr), True, receiver.id in self.carried
            found = self.house.resolve_name(self.fn.module, ast.unparse(f)) if _dotted(f) else None
            if isinstance(found, Function):
                return found, found.cls is not None and _is_classmethod(found), False
        return None, False, False

    def call(self, call: ast.Call) -> None:
        fn, bound, via_receiver = self.callee(call)
        if fn is None:
            return
        params = fn.params(bound)
        given: set[str] = set()
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                if self.holds(arg) and fn.node.args.vararg:
                    given.add(fn.node.args.vararg.arg)
                continue
            if i < len(params) and self.holds(arg):
                given.add(params[i])
        for kw in call.keywords:
            if self.holds(kw.value):
                if kw.arg is None or kw.arg not in {a.arg for a in [*fn.node.args.args, *fn.node.args.kwonlyargs]}:
                    if fn.node.args.kwarg:
                        given.add(fn.node.args.kwarg.arg)
                else:
                    given.add(kw.arg)
        if given or via_receiver:
            self.trip.enter(fn, given)


def _bindings(stmt: ast.stmt) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) of each binding a statement makes."""
    if isinstance(stmt, ast.Assign):
        return [(target, stmt.value) for target in stmt.targets]
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
        return [(stmt.target, stmt.value)]
    if isinstance(stmt, ast.For):
        return [(stmt.target, stmt.iter)]
    if isinstance(stmt, ast.With):
        return [(item.optional_vars, item.context_expr) for item in stmt.items if item.optional_vars is not None]
    return []


def _dotted(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) or isinstance(node, ast.Attribute) and _dotted(node.value)


def _is_classmethod(fn: Function) -> bool:
    return any(isinstance(d, ast.Name) and d.id in ("classmethod", "staticmethod") for d in fn.node.decorator_list)


def _calls(stmt: ast.stmt) -> list[ast.Call]:
    """The calls of one statement (not of the statements inside it), arguments before the call, in written order."""
    out: list[ast.Call] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.Lambda, ast.ExceptHandler)):
                continue
            visit(child)
        if isinstance(node, ast.Call):
            out.append(node)

    for child in ast.iter_child_nodes(stmt):
        if not isinstance(child, (ast.stmt, ast.ExceptHandler)):
            visit(child)
    return out


def walk(start: str, root: Path = ROOT, stops: int = 400) -> list[tuple[str, str]]:
    """The functions a parameter enters, in order, from ``FILE:FUNCTION:PARAM`` (FUNCTION: name or Class.method)."""
    house = House(root)
    file, function, param = start.split(":")
    module = next(name for name, path in house.files.items() if path == (root / file).resolve())
    fn = house.resolve_name(module, function)
    if not isinstance(fn, Function):
        raise SystemExit(f"error: {file} has no function {function}")
    trip = Trip(house, stops)
    trip.enter(fn, {param})
    return trip.events


def stays(events: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """The files in the order entered, consecutive entries of one file as one stay (with its functions)."""
    out: list[tuple[str, list[str]]] = []
    for file, function in events:
        if out and out[-1][0] == file:
            out[-1][1].append(function)
        else:
            out.append((file, [function]))
    return out


def returns(events: list[tuple[str, str]]) -> int:
    """Stays in a file that the walk had been in and left."""
    seen: set[str] = set()
    count = 0
    for file, _ in stays(events):
        count += file in seen
        seen.add(file)
    return count


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("circles", "faces", "walk", "size") or (argv[0] == "walk") != (len(argv) == 2):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    if argv[0] == "circles":
        found = circles()
        for i, edges in enumerate(found, 1):
            print(f"circle {i}: {', '.join(sorted({e.source for e in edges}))}")
            for e in edges:
                print(f"  {e.source} -> {e.target}  ({e.how}, line {e.line})")
        print(f"{len(found)} circle{'' if len(found) == 1 else 's'} between {len(module_files())} modules")
        return 1 if found else 0
    if argv[0] == "faces":
        found = faces()
        print("\n".join([*found, f"{len(found)} import{'' if len(found) == 1 else 's'} through a face"]))
        return 1 if found else 0
    if argv[0] == "size":
        lines = size()
        longest = ", ".join(f"{file} {n}" for file, n in list(lines.items())[:5])
        print(f"{sum(lines.values())} lines in {len(lines)} modules; the longest: {longest}")
        return 0
    events = walk(argv[1])
    trip = stays(events)
    seen: set[str] = set()
    for n, (file, functions) in enumerate(trip, 1):
        again = " (again)" if file in seen else ""
        seen.add(file)
        print(f"{n:3d}. {file}{again}: {', '.join(dict.fromkeys(functions))}")
    files = len({file for file, _ in trip})
    print(f"{len(events)} functions entered, {len(trip)} stays in {files} files, {returns(events)} returns")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
