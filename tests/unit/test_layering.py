"""Every import goes down the layers (DESIGN.md "Layers"), and no modules import each other in a loop.

The allowed directions are data (:data:`MAY_IMPORT`); the imports are read with :mod:`ast` from the
source, those inside functions included, so a late import cannot hide a dependency that runs back up.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dr", "verification", "stacks")

# Each layer (a package, or the root ``dr`` package's face) and the layers it may import besides itself,
# from the ground up.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "dr.base": frozenset(),
    "dr.kafka": frozenset({"dr.base"}),
    "dr.runtime": frozenset({"dr.base", "dr.kafka"}),
    "dr.topology": frozenset({"dr.base", "dr.kafka", "dr.runtime"}),
    # The Pulumi program never imports what drives it (estate, failover, cli).
    "stacks": frozenset({"dr.base", "dr.kafka", "dr.runtime", "dr.topology"}),
    "dr.estate": frozenset({"dr.base", "dr.kafka", "dr.runtime", "dr.topology", "stacks"}),
    # The verification job runs in Spark's driver: it needs only the base and the Kafka client.
    "verification": frozenset({"dr.base", "dr.kafka"}),
    "dr.failover": frozenset(
        {"dr.base", "dr.kafka", "dr.runtime", "dr.topology", "stacks", "dr.estate", "verification"}
    ),
    # The per-site controller: a floor above the failover (it starts failovers through it), below the CLI.
    "dr.controller": frozenset(
        {"dr.base", "dr.kafka", "dr.runtime", "dr.topology", "stacks", "dr.estate", "verification", "dr.failover"}
    ),
    "dr.cli": frozenset(
        {
            "dr.base",
            "dr.kafka",
            "dr.runtime",
            "dr.topology",
            "stacks",
            "dr.estate",
            "verification",
            "dr.failover",
            "dr.controller",
        }
    ),
    "dr": frozenset({"dr.base"}),  # dr/__init__.py hands DRError on
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str | None:
    """The layer of a module of the product: the longest name in :data:`MAY_IMPORT` it starts with."""
    found = [layer for layer in MAY_IMPORT if module == layer or module.startswith(layer + ".")]
    return max(found, key=len) if found else None


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for package in PACKAGES for path in sorted((REPO_ROOT / package).rglob("*.py"))}


def _imports(module: str, path: Path, known: set[str]) -> Iterator[tuple[int, str]]:
    """(line, imported module of the product) for every import in ``path``, at any depth."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` the module mod.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in PACKAGES:
                yield node.lineno, target


def _graph() -> dict[str, dict[str, int]]:
    modules = _modules()
    known = set(modules)
    return {
        module: {target: line for line, target in _imports(module, path, known) if target != module}
        for module, path in modules.items()
    }


def test_every_module_belongs_to_a_layer() -> None:
    assert [module for module in _modules() if _layer(module) is None] == []


def test_every_import_goes_down_the_layers() -> None:
    wrong = [
        f"{module} imports {target} (line {line}): {_layer(module)} may not import {_layer(target)}"
        for module, targets in sorted(_graph().items())
        for target, line in sorted(targets.items())
        if _layer(target) != _layer(module) and _layer(target) not in MAY_IMPORT[_layer(module) or ""]
    ]
    assert wrong == [], "\n".join(wrong)


def test_no_modules_import_each_other_in_a_loop() -> None:
    graph = _graph()
    done: set[str] = set()
    loops: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            loops.append([*path[path.index(module) :], module])
            return
        if module in done or module not in graph:
            return
        for target in sorted(graph[module]):
            # ``import pkg.mod`` runs pkg/__init__.py as well; a package's own face is not a loop with it
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert loops == [], "\n".join(" -> ".join(loop) for loop in loops)


# ---------------------------------------------------------------------------------- the rooms of dr.failover

KINDS_PACKAGE = "dr.failover.kinds"
#: The one import between architectures: the hub of a hub-and-spoke stack fails over as an active-passive pair.
KIND_MAY_IMPORT: dict[str, frozenset[str]] = {"hub_spoke": frozenset({"active_passive"})}
#: Every architecture's folder has these files (a new architecture starts as a copy of one).
KIND_FILES = ("__init__.py", "steps.py", "run.py", "drill.py")


def _kind(module: str) -> str | None:
    """The architecture folder under :data:`KINDS_PACKAGE` a module is in (None: not in one)."""
    if not module.startswith(KINDS_PACKAGE + "."):
        return None
    return module[len(KINDS_PACKAGE) + 1 :].split(".")[0]


def test_no_architecture_imports_another() -> None:
    """A module under ``kinds/<a>`` imports nothing of ``kinds/<b>`` — but the declared "hub wraps
    active-passive"."""
    bad = [
        f"{module} imports {target} (line {line})"
        for module, targets in _graph().items()
        if (kind := _kind(module)) is not None
        for target, line in targets.items()
        if (other := _kind(target)) is not None
        and other != kind
        and other not in KIND_MAY_IMPORT.get(kind, frozenset())
    ]
    assert bad == [], "\n".join(bad)


def test_the_frame_and_the_cli_name_no_architecture() -> None:
    """The run frame (``dr.failover.frame``), what touches Kafka (``act``), the shared drill frame
    (``drill``) and the CLI never import an architecture's module: the CLI asks ``KINDS`` only."""
    rooms = (*(f"dr.failover.{room}" for room in ("frame", "act", "drill")), "dr.cli")
    bad = [
        f"{module} imports {target} (line {line})"
        for module, targets in _graph().items()
        if any(module == room or module.startswith(room + ".") for room in rooms)
        for target, line in targets.items()
        if _kind(target) is not None
    ]
    assert bad == [], "\n".join(bad)


def test_every_architecture_has_the_same_files() -> None:
    """Each folder under ``dr/failover/kinds`` has ``steps.py``, ``run.py`` and ``drill.py``, and
    :data:`dr.failover.kinds.KINDS` has one entry per architecture, each a folder of its own named by the
    architecture (:attr:`~dr.topology.kinds.Architecture.module`), as its topology module is."""
    from dr.failover.kinds import KINDS
    from dr.topology import Architecture

    root = REPO_ROOT / "dr" / "failover" / "kinds"
    folders = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    missing = [f"{folder}/{name}" for folder in folders for name in KIND_FILES if not (root / folder / name).exists()]
    assert missing == []
    assert set(KINDS) == set(Architecture)
    assert sorted(type(kind).__module__.rpartition(".")[2] for kind in KINDS.values()) == folders
    assert sorted(a.module for a in Architecture) == folders
    assert all((REPO_ROOT / "dr" / "topology" / f"{a.module}.py").exists() for a in Architecture)


def test_the_frame_never_asks_the_architecture() -> None:
    """No module of ``dr/failover/frame`` tests which architecture it runs (``Architecture``,
    ``is_active_active``, ``is_hub_spoke``, ``.architecture``): what varies is a kind's."""
    import re

    asks = re.compile(r"\bArchitecture\b|\bis_active_active\b|\bis_hub_spoke\b|\.architecture\b")
    bad = [
        f"{path.relative_to(REPO_ROOT)}:{n}: {line.strip()}"
        for path in sorted((REPO_ROOT / "dr" / "failover" / "frame").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if asks.search(line.split("#")[0])
    ]
    assert bad == [], "\n".join(bad)


#: The floors of ``dr.failover``, from the ground up, each a set of rooms (a folder or a module): what both the
#: frame and act write (``record``); what touches Kafka; the frame every run shares; the lifecycle and
#: ``drctl status`` (with its parity check); what every drill shares; the contract each architecture declares; the architectures.
FAILOVER_FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"dr.failover.record"}),
    frozenset({"dr.failover.act"}),
    frozenset({"dr.failover.frame"}),
    frozenset({"dr.failover.lifecycle", "dr.failover.status", "dr.failover.parity"}),  # what a person runs on a stack
    frozenset({"dr.failover.drill"}),
    frozenset({"dr.failover.kind"}),
    frozenset({"dr.failover.kinds"}),
)


def _failover_floor(module: str) -> int | None:
    """The floor of a module of ``dr.failover`` (None: the package's face, or not in ``dr.failover``)."""
    for floor, rooms in enumerate(FAILOVER_FLOORS):
        if any(module == room or module.startswith(room + ".") for room in rooms):
            return floor
    return None


def test_every_failover_module_is_on_a_floor() -> None:
    modules = [m for m in _modules() if m.startswith("dr.failover.") and _failover_floor(m) is None]
    assert modules == []


def test_no_import_inside_the_failover_runs_back_up() -> None:
    """Inside ``dr/failover``, every import goes to the module's own floor or below
    (:data:`FAILOVER_FLOORS`), those inside functions and under ``TYPE_CHECKING`` included: a type a lower
    floor needs lives below it."""
    bad = [
        f"{module} (floor {floor}) imports {target} (floor {up}, line {line})"
        for module, targets in sorted(_graph().items())
        if (floor := _failover_floor(module)) is not None
        for target, line in sorted(targets.items())
        if (up := _failover_floor(target)) is not None and up > floor
    ]
    assert bad == [], "\n".join(bad)


#: The topology modules of one architecture each (its shape, its predicates, its rules).
def _architecture_topologies() -> frozenset[str]:
    from dr.topology import Architecture

    return frozenset(f"dr.topology.{a.module}" for a in Architecture)


ARCHITECTURE_TOPOLOGIES = _architecture_topologies()


def test_the_cli_never_asks_the_architecture() -> None:
    """No module of ``dr/cli`` imports an architecture's topology module or tests an architecture
    (``is_active_active``, ``is_hub_spoke``, ``Architecture.<member>``): a command looks the stack's kind up in
    ``KINDS`` and asks it (``drctl verify --edge`` included)."""
    import re

    asks = re.compile(r"\bis_active_active\b|\bis_hub_spoke\b|\bArchitecture\.[A-Z_]+")
    imports = [
        f"{module} imports {target} (line {line})"
        for module, targets in _graph().items()
        if module == "dr.cli" or module.startswith("dr.cli.")
        for target, line in targets.items()
        if target in ARCHITECTURE_TOPOLOGIES
    ]
    tests = [
        f"{path.relative_to(REPO_ROOT)}:{n}: {line.strip()}"
        for path in sorted((REPO_ROOT / "dr" / "cli").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if asks.search(line.split("#")[0])
    ]
    assert imports + tests == [], "\n".join(imports + tests)


def test_the_frame_the_estate_and_the_stacks_name_no_architecture_topology() -> None:
    """The failover frame (``dr.failover.frame``), the estate (``dr.estate``) and the Pulumi program
    (``stacks``) import no architecture's topology module: the topic queries they ask whatever the
    architecture live in ``dr.topology.topics``, and a link's naming is ``Topology.naming``."""
    rooms = ("dr.failover.frame", "dr.estate", "stacks")
    bad = [
        f"{module} imports {target} (line {line})"
        for module, targets in _graph().items()
        if any(module == room or module.startswith(room + ".") for room in rooms)
        for target, line in targets.items()
        if target in ARCHITECTURE_TOPOLOGIES
    ]
    assert bad == [], "\n".join(bad)


def test_validation_and_the_model_ask_the_architectures_table() -> None:
    """``dr/topology/validation.py`` and ``dr/topology/model.py`` never test the architecture (``is``/``==``/
    ``!=`` an ``Architecture`` member, or a table keyed by one): what varies is the stack's entry of
    ``dr.topology.architectures.ARCHITECTURES`` (its rules, its failover's shape, where applications write)."""
    import re

    asks = re.compile(r"(?:\bis(?: not)?|==|!=)\s*Architecture\.|\bArchitecture\.[A-Z_]+\s*(?:==|!=|\bis\b|:|\])")
    bad = [
        f"dr/topology/{name}:{n}: {line.strip()}"
        for name in ("validation.py", "model.py")
        for n, line in enumerate((REPO_ROOT / "dr" / "topology" / name).read_text(encoding="utf-8").splitlines(), 1)
        if asks.search(line.split("#")[0])
    ]
    assert bad == [], "\n".join(bad)


def _product_trees() -> Iterator[tuple[str, ast.AST]]:
    for module, path in sorted(_modules().items()):
        yield module, ast.parse(path.read_text(encoding="utf-8"))


RUNNERS = frozenset({"MirrorMaker", "ConnectLink"})


def test_only_the_runtime_names_a_link_runner_class() -> None:
    """Above dr/runtime a runner is a ``dr.runtime.links.LinkRunner`` from the estate: no code names (so
    none builds or type-tests) ``MirrorMaker`` or ``ConnectLink``."""
    named = []
    for module, tree in _product_trees():
        if _layer(module) == "dr.runtime":
            continue
        for node in ast.walk(tree):
            names = (
                [node.id]
                if isinstance(node, ast.Name)
                else [node.attr]
                if isinstance(node, ast.Attribute)
                else [a.asname or a.name for a in node.names] + [a.name for a in node.names]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            named += [f"{module}:{node.lineno} names {n}" for n in names if n in RUNNERS]
    assert named == [], "\n".join(named)


def test_a_runner_lookup_loads_no_pulumi() -> None:
    """``Estate.link_runner`` picks a runner from ``stacks.links.LINK_RUNNERS``: importing that table loads
    neither Pulumi nor the program's components, so ``drctl status`` and ``drctl link`` start as fast as before."""
    import subprocess
    import sys

    code = "import sys, dr.estate.estate, stacks.links; print(sorted(m for m in sys.modules if m == 'pulumi' or m.startswith('stacks.link.') or m == 'stacks.link'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def _declares(tree: ast.AST, name: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return True
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def test_progress_reporter_and_the_model_base_are_declared_once() -> None:
    """``Progress``, ``Reporter`` and the pydantic base that refuses unknown fields live in dr/base/types.py
    only; elsewhere they are imported, never declared again."""
    again = [
        f"{module} declares {name}"
        for module, tree in _product_trees()
        if module != "dr.base.types"
        for name in ("Progress", "Reporter", "Model")
        if _declares(tree, name)
    ]
    forbid_bases = [
        f"{module}:{node.lineno} {node.name} derives BaseModel with extra='forbid' (derive dr.base.types.Model)"
        for module, tree in _product_trees()
        if module != "dr.base.types"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "BaseModel" for b in node.bases)
        and any(
            isinstance(k, ast.keyword)
            and k.arg == "extra"
            and isinstance(k.value, ast.Constant)
            and k.value.value == "forbid"
            for k in ast.walk(node)
        )
    ]
    assert again + forbid_bases == [], "\n".join(again + forbid_bases)


def test_a_placement_is_one_value_one_rule_and_its_table_lines() -> None:
    """Adding an engine touches one place for its placement: the value and the rule that places a link
    there (``Placement.of``) in dr/topology/kinds.py. Every value is reached by that rule and has its
    component and its runner in ``stacks.links``; no other module decides a placement (returns one)."""
    from itertools import product

    from dr.topology.kinds import Engine, Placement
    from stacks.links import LINK_COMPONENTS, LINK_RUNNERS

    reached = {
        Placement.of(engine, on_connect=on_connect, both_local=both_local)
        for engine, on_connect, both_local in product(Engine, (False, True), (False, True))
    }
    assert reached == set(Placement)
    assert set(LINK_COMPONENTS) == set(Placement)
    assert set(LINK_RUNNERS) <= set(Placement)
    deciding = _returning("Placement")
    assert deciding == [], "\n".join(deciding)


def _returning(enum: str) -> list[str]:
    """Every ``return <enum>.<VALUE>`` of the product outside dr/topology/kinds.py, as ``module:line``."""
    return [
        f"{module}:{node.lineno} returns {enum}.{node.value.attr}"
        for module, tree in _product_trees()
        if module != "dr.topology.kinds"
        for node in ast.walk(tree)
        if isinstance(node, ast.Return)
        and isinstance(node.value, ast.Attribute)
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == enum
    ]


def test_a_naming_is_one_value_one_rule() -> None:
    """How a link names its copies is decided in one place: the value in dr/topology/kinds.py, and what each
    architecture's shape declares (``naming``, ``edge_naming``: ``Topology.naming`` picks between them), every
    value reached by one; no other module decides a naming (returns one)."""
    from dr.topology import ARCHITECTURES, Naming

    reached = {naming for shape in ARCHITECTURES.values() for naming in (shape.naming, shape.edge_naming)}
    assert reached == set(Naming)
    deciding = _returning("Naming")
    assert deciding == [], "\n".join(deciding)


def _architecture_room(module: str) -> bool:
    """True for a module of an architecture's two rooms: ``dr/topology/<arch>.py`` and
    ``dr/failover/kinds/<arch>/``."""
    from dr.topology import Architecture

    return module in ARCHITECTURE_TOPOLOGIES or any(
        module == f"{KINDS_PACKAGE}.{a.module}" or module.startswith(f"{KINDS_PACKAGE}.{a.module}.")
        for a in Architecture
    )


#: What may still name an architecture outside its rooms, as ``(module, what it names)``, and why:
NAMES_AN_ARCHITECTURE: frozenset[tuple[str, str]] = frozenset(
    {
        # The stack-file schema's default: a stack without ``kafka-dr:architecture`` is active-passive. It is the
        # model field's default (the schema page is generated from it); everything else that needs the default
        # reads it from that field (dr/topology/stackconfig.py, dr/failover/status.py).
        ("dr.topology.model", "Architecture.ACTIVE_PASSIVE"),
        # The enum's own values, where the members are defined (dr/topology/kinds.py).
        ("dr.topology.kinds", "active-passive"),
        ("dr.topology.kinds", "active-active"),
        ("dr.topology.kinds", "hub-spoke"),
    }
)


def test_no_module_outside_an_architectures_rooms_names_it() -> None:
    """Outside ``dr/topology/<arch>.py`` and ``dr/failover/kinds/<arch>/``, no module of the product imports an
    architecture's topology module, names an ``Architecture`` member (``Architecture.HUB_SPOKE``), or compares
    with an architecture's value (``"hub-spoke"``): what differs per architecture is a field of its ``SHAPE``
    (``ARCHITECTURES``) or its ``KIND`` (``KINDS``), which the shared modules ask. The tables find the rooms by
    the architecture's name (``import_module``) and name none. Only :data:`NAMES_AN_ARCHITECTURE` is left."""
    from dr.topology import Architecture

    members = {a.name for a in Architecture}
    values = {a.value for a in Architecture} | ARCHITECTURE_TOPOLOGIES
    imports = [
        f"{module} imports {target} (line {line})"
        for module, targets in sorted(_graph().items())
        if not _architecture_room(module)
        for target, line in sorted(targets.items())
        if target in ARCHITECTURE_TOPOLOGIES
    ]
    named: list[tuple[str, str, int]] = []
    for module, tree in _product_trees():
        if _architecture_room(module):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "Architecture"
                and node.attr in members
            ):
                named.append((module, f"Architecture.{node.attr}", node.lineno))
            elif isinstance(node, ast.Constant) and node.value in values:
                named.append((module, str(node.value), node.lineno))
    names = [
        f"{module}:{line} names {what}" for module, what, line in named if (module, what) not in NAMES_AN_ARCHITECTURE
    ]
    assert imports + names == [], "\n".join(imports + names)
    # the allow-list holds only what is still there
    assert {(module, what) for module, what, _ in named} == NAMES_AN_ARCHITECTURE


def test_no_assert_in_product_code() -> None:
    """An ``assert`` vanishes under ``python -O``: product code narrows a type or refuses bad state with
    an ``if``, never with ``assert`` (HOUSE.md "How to know it worked")."""
    found = [
        f"{module}:{node.lineno}"
        for module, path in _modules().items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assert)
    ]
    assert not found, f"assert in product code: {found}"
