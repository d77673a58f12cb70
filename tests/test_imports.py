"""The import graph, read from the import statements (no module is imported): no cycle between the
modules of rmqtx/, interop/ or testkit/; rmqtx's layers import only downwards; and the top-level
packages keep apart (tests and benchmarks share testkit/, never each other).

rmqtx's layers, lowest first: ``common`` (with ``accel``) <- ``remoting`` <- ``namesrv`` (and ``controller``,
which nothing but the launcher imports); ``common``
<- ``store`` <- ``broker``. ``store`` imports only ``common`` (and ``accel``); ``remoting`` knows no
broker, store or NameServer; nothing but ``rmqtx/launcher.py`` imports ``rmqtx.console`` or
``rmqtx.grpc`` (the console and the gRPC endpoint sit on top of the broker, started beside it).

Every import counts, wherever it stands: at module level, inside a function (a deferred import is
still a dependency, only a later one) and under ``if TYPE_CHECKING:``: a type a module names is a
dependency it has, whether or not it is loaded at run time, so a TYPE_CHECKING import upwards is as
wrong as any other, and one that closes a cycle is a cycle.
"""
from __future__ import annotations

import ast
import functools
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The top-level packages read; modules outside them (the standard library, Twisted, ...) are no nodes.
TOP = ("rmqtx", "testkit", "interop", "tests", "benchmarks")
#: Directories under them that hold no module of ours (installed clients, build outputs).
NOT_OURS = {"node_modules", "__pycache__", "build", "target"}

#: rmqtx layer -> the only layers its modules may import ("" is the rmqtx package itself).
MAY_IMPORT_ONLY = {
    "common": {"", "accel", "common"},
    "remoting": {"", "accel", "common", "remoting"},
    "store": {"", "accel", "common", "store"},
}
#: rmqtx layer -> layers above or beside it that it must not import.
MUST_NOT_IMPORT = {
    "namesrv": {"broker", "store", "client", "console", "grpc", "spark", "tools", "launcher", "controller"},
    "broker": {"namesrv", "spark", "tools", "launcher", "controller"},
    "controller": {"broker", "store", "namesrv", "client", "console", "grpc", "spark", "tools", "launcher"},
}
#: The only module outside them that may import rmqtx.console and rmqtx.grpc.
CONSOLE_GRPC_IMPORTER = "rmqtx.launcher"
#: top-level package -> the top-level packages it must not import.
APART = {
    "rmqtx": {"testkit", "interop", "tests", "benchmarks"},
    "testkit": {"interop", "tests", "benchmarks"},
    "interop": {"tests", "benchmarks"},
    "tests": {"benchmarks"},
    "benchmarks": {"tests"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The known modules a file imports, at any depth of its syntax tree (functions, TYPE_CHECKING blocks)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # "from pkg import mod" names a module when pkg.mod is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # "import rmqtx.x.y as z" or an attribute of a module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def source_files() -> list[Path]:
    files = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).parts
            if not NOT_OURS & set(rel) and not any(p.startswith(".") for p in rel):
                files.append(path)
    return files


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports, for every module of the top-level packages."""
    files = source_files()
    known = {module_name(p) for p in files} | set(TOP)  # benchmarks/ has no __init__.py
    return {module_name(p): imports_of(p, known) for p in files}


def cycles_within(graph: dict[str, set[str]], prefix: str) -> list[list[str]]:
    """One cycle per strongly connected group of modules under prefix (Tarjan), edges outside ignored."""
    nodes = [m for m in graph if m == prefix or m.startswith(prefix + ".")]
    inside = set(nodes)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v] & inside):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in nodes:
        if v not in index:
            visit(v)
    return found


def layer(module: str) -> str:
    """rmqtx.broker.service -> broker; rmqtx.launcher -> launcher; rmqtx -> ""."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs of rmqtx that break MAY_IMPORT_ONLY or MUST_NOT_IMPORT."""
    bad = []
    for module, targets in graph.items():
        if module.split(".")[0] != "rmqtx":
            continue
        mine = layer(module)
        for target in targets:
            if target.split(".")[0] != "rmqtx" or layer(target) == mine:
                continue
            if mine in MAY_IMPORT_ONLY and layer(target) not in MAY_IMPORT_ONLY[mine]:
                bad.append((module, target))
            elif layer(target) in MUST_NOT_IMPORT.get(mine, ()):
                bad.append((module, target))
    return sorted(bad)


def console_grpc_importers(graph: dict[str, set[str]]) -> set[str]:
    """Modules of rmqtx outside rmqtx.console and rmqtx.grpc that import either, but the launcher."""
    return {module for module, targets in graph.items()
            if module.split(".")[0] == "rmqtx" and layer(module) not in ("console", "grpc") and module != CONSOLE_GRPC_IMPORTER
            and any(t.split(".")[0] == "rmqtx" and layer(t) in ("console", "grpc") for t in targets)}


@functools.lru_cache(maxsize=1)
def shared_graph() -> dict[str, set[str]]:
    """import_graph() once per process: parsing every source file takes seconds (tests only read it)."""
    return import_graph()


class Graph(unittest.TestCase):
    def setUp(self) -> None:
        self.graph = shared_graph()

    def test_the_graph_is_read(self) -> None:
        store = self.graph["rmqtx.store.message_store"]
        self.assertIn("rmqtx.store.commitlog", store)
        self.assertIn("rmqtx.common.message", store)
        self.assertIn("rmqtx.store.record", self.graph["rmqtx.store.commitlog"])  # "from . import record as R"
        self.assertIn("rmqtx.spark.scan", self.graph["rmqtx.spark.network"])  # "from . import scan as S"
        self.assertIn("testkit.standalone", self.graph["benchmarks.bench"])
        self.assertIn("rmqtx.grpc.server", self.graph["rmqtx.launcher"])  # in a function
        self.assertGreater(len([m for m in self.graph if m.startswith("rmqtx.")]), 150)
        self.assertFalse([m for m in self.graph if "node_modules" in m])

    def test_cycles_are_found(self) -> None:
        graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}, "q.x": {"p.d"}}
        self.assertEqual(cycles_within(graph, "p"), [["p.a", "p.b", "p.c"]])
        self.assertEqual(cycles_within({"p.a": {"p.b"}, "p.b": set()}, "p"), [])

    def test_upward_imports_are_found(self) -> None:
        graph = {"rmqtx.store.x": {"rmqtx.remoting.y", "rmqtx.common.z", "rmqtx.store.w"},
                 "rmqtx.remoting.y": {"rmqtx.broker.v"}, "rmqtx.namesrv.n": {"rmqtx.remoting.y", "rmqtx.broker.v"},
                 "rmqtx.broker.v": {"rmqtx.store.x", "rmqtx.remoting.y"}, "rmqtx.common.z": {"rmqtx.accel"}}
        self.assertEqual(upward_imports(graph), [("rmqtx.namesrv.n", "rmqtx.broker.v"),
                                                 ("rmqtx.remoting.y", "rmqtx.broker.v"),
                                                 ("rmqtx.store.x", "rmqtx.remoting.y")])
        graph = {"rmqtx.launcher": {"rmqtx.grpc.server"}, "rmqtx.grpc.server": {"rmqtx.grpc.backend", "rmqtx.broker.v"},
                 "rmqtx.broker.v": {"rmqtx.console.web"}}
        self.assertEqual(console_grpc_importers(graph), {"rmqtx.broker.v"})

    def test_rmqtx_has_no_import_cycle(self) -> None:
        self.assertEqual(cycles_within(self.graph, "rmqtx"), [])

    def test_interop_and_testkit_have_no_import_cycle(self) -> None:
        self.assertEqual(cycles_within(self.graph, "interop") + cycles_within(self.graph, "testkit"), [])

    def test_rmqtx_layers_import_only_downwards(self) -> None:
        self.assertEqual(upward_imports(self.graph), [])

    def test_only_the_launcher_imports_console_and_grpc(self) -> None:
        self.assertEqual(console_grpc_importers(self.graph), set())

    def test_top_level_packages_keep_apart(self) -> None:
        bad = sorted((m, t) for m, targets in self.graph.items() for t in targets
                     if t.split(".")[0] in APART.get(m.split(".")[0], ()))
        self.assertEqual(bad, [])
