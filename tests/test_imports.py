"""The package's layers, read from the import statements (no module is imported):
rmqtx/store has no import cycle and imports nothing from the broker, remoting or client layers.

Imports under ``if TYPE_CHECKING:`` count as edges too: a type the store names is a dependency
the store has, whether or not it is loaded at run time."""
from __future__ import annotations

import ast
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rmqtx"
STORE_MUST_NOT_IMPORT = ("rmqtx.broker", "rmqtx.remoting", "rmqtx.client")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The rmqtx modules a file imports, at any depth of its syntax tree (functions, TYPE_CHECKING blocks)."""
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
            if target.startswith("rmqtx") and target != name:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(p) for p in files}
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


class Layers(unittest.TestCase):
    def setUp(self) -> None:
        self.graph = import_graph()

    def test_the_graph_is_read(self) -> None:
        store = self.graph["rmqtx.store.message_store"]
        self.assertIn("rmqtx.store.commitlog", store)
        self.assertIn("rmqtx.common.message", store)
        self.assertIn("rmqtx.store.record", self.graph["rmqtx.store.commitlog"])  # "from . import record as R"

    def test_cycles_are_found(self) -> None:
        graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}, "q.x": {"p.d"}}
        self.assertEqual(cycles_within(graph, "p"), [["p.a", "p.b", "p.c"]])
        self.assertEqual(cycles_within({"p.a": {"p.b"}, "p.b": set()}, "p"), [])

    def test_store_has_no_import_cycle(self) -> None:
        self.assertEqual(cycles_within(self.graph, "rmqtx.store"), [])

    def test_store_stays_below_broker_remoting_and_client(self) -> None:
        bad = sorted((m, t) for m, targets in self.graph.items() if m.startswith("rmqtx.store")
                     for t in targets if t.startswith(STORE_MUST_NOT_IMPORT))
        self.assertEqual(bad, [])
