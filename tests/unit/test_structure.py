"""Structural rules of the code base, checked from the source (ast), not by convention:

* no import cycle anywhere in ``raftlog/`` -- ``TYPE_CHECKING`` imports count too (a cycle
  hidden from the interpreter is still one a reader must untangle);
* no module of ``raftlog/server`` imports ``PeerNode`` (services get narrow interfaces),
  except ``main.py``, the process entry point that builds and runs it;
* no hand-built frame list is sent outside ``raftlog/rpc`` and ``raftlog/transport.py``:
  every message is encoded by the wire package;
* ``raftlog/rpc`` is a leaf: it imports only itself and the few shared primitives below it,
  never the topic model (issue #26) -- topic codecs live in ``raftlog/topics``;
* the topic model has one home: no module named ``topic*`` lives outside ``raftlog/topics``,
  except the thin CLI and REST adapters that translate to it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "raftlog"


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every raftlog module ``name`` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known:
                    yield submodule
                elif base in known:
                    yield base


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {
        name: {target for target in imports_of(name, path, known) if target != name}
        for name, path in known.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_in_raftlog_counting_type_checking_imports() -> None:
    graph = import_graph()
    assert "raftlog.server.node" in graph["raftlog.cli.peer"]  # the walk sees imports
    assert cycles(graph) == []


def test_no_server_module_imports_the_peer_node() -> None:
    graph = import_graph()
    importers = sorted(
        name
        for name, targets in graph.items()
        if name.startswith("raftlog.server.") and "raftlog.server.node" in targets
    )
    assert importers == []  # only the entry point, raftlog.cli.peer, builds the node


SEND_NAMES = ("send", "send_multipart", "send_frames", "send_routed", "_send")


def hand_built_sends(path: Path) -> Iterator[int]:
    """Lines sending a list literal (``[a, b, ...]``) through any send-like call."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in SEND_NAMES and any(isinstance(arg, ast.List) for arg in node.args):
            yield node.lineno


def test_the_send_checker_sees_a_hand_built_list(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("sock.send_multipart([b'1', TYPE, ident])\nsock.send(frames)\n")
    assert list(hand_built_sends(sample)) == [1]


def test_frames_are_built_only_by_the_wire_package() -> None:
    allowed = {PACKAGE / "transport.py"}
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in allowed and PACKAGE / "rpc" not in path.parents
        for line in hand_built_sends(path)
    ]
    assert offenders == []


MAX_MODULE_LINES = 400
"""The house rule, held as a hard stop: a module that would grow past it is split first (the
split of 2026-11-28 brought the sixteen modules between 401 and 450 lines under 380)."""


def test_modules_stay_small() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


RPC_MAY_IMPORT = frozenset({"raftlog.entry", "raftlog.errors", "raftlog.bounds"})
"""What the wire package may use besides itself: log entries, the exception tree, the term
and index ceilings -- none of them knows a topic."""


def rpc_escapes(graph: dict[str, set[str]]) -> set[str]:
    """``module -> target`` for every import of the wire package that leaves it."""
    return {
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name == "raftlog.rpc" or name.startswith("raftlog.rpc.")
        for target in targets
        if target != "raftlog.rpc"
        and not target.startswith("raftlog.rpc.")
        and target not in RPC_MAY_IMPORT
    }


def test_the_rpc_checker_sees_a_topic_import() -> None:
    fake = {"raftlog.rpc.codec": {"raftlog.topics.records", "raftlog.rpc.frames", "raftlog.entry"}}
    assert rpc_escapes(fake) == {"raftlog.rpc.codec -> raftlog.topics.records"}


def test_rpc_is_a_leaf_that_knows_no_topic() -> None:
    assert rpc_escapes(import_graph()) == set()
    words = {
        str(path.relative_to(ROOT))
        for path in (PACKAGE / "rpc").rglob("*.py")
        if path.stem.startswith(("topic", "transaction"))
    }
    assert words == set()


TOPIC_ADAPTERS = frozenset({"raftlog/cli/admin_topics.py", "raftlog/rest/topic_routes.py"})
"""Thin adapters that translate a CLI command or an HTTP route to ``raftlog.topics``."""


def test_no_topic_module_outside_the_topics_package() -> None:
    stray = {
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("topic*.py")
        if PACKAGE / "topics" not in path.parents
    }
    assert stray - TOPIC_ADAPTERS == set()
    assert {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")} >= TOPIC_ADAPTERS



MAX_PEER_NODE_ATTRIBUTES = 15


def instance_attributes(path: Path, class_name: str) -> set[str]:
    """Names a class assigns on ``self`` anywhere in its methods."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    return {
        target.attr
        for node in ast.walk(cls)
        for target in (
            node.targets if isinstance(node, ast.Assign)
            else [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else []
        )
        for target in (target.elts if isinstance(target, ast.Tuple) else [target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }


def test_the_attribute_counter_sees_tuple_and_annotated_assignments(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "class C:\n    def f(self):\n        self.a, self.b = 1, 2\n        self.c: int = 3\n"
    )
    assert instance_attributes(source, "C") == {"a", "b", "c"}


def test_the_peer_node_stays_a_thin_driver() -> None:
    """Issue #26: the wiring lives in ``build_peer`` and its parts are grouped
    (``PeerParts``); a ``PeerNode`` gaining attributes again is the wiring creeping back."""
    names = instance_attributes(ROOT / "raftlog" / "server" / "node.py", "PeerNode")
    assert len(names) <= MAX_PEER_NODE_ATTRIBUTES, sorted(names)


def test_observability_imports_nothing_from_rest() -> None:
    """Issue #26: the listener serves the REST routes it is handed (a ``mount`` callback);
    what both need -- the HTTP error type, token auth, app keys -- lives in ``raftlog.web``."""
    graph = import_graph()
    escapes = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name.startswith("raftlog.observability")
        for target in targets
        if target.startswith("raftlog.rest")
    )
    assert escapes == []
