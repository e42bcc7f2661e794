"""The package's folders are its layers: a lower layer never imports a higher one.

From the bottom: the pure core (modules at the package root), ``report`` (the
read model and its formats), ``store`` (both backends), ``net`` (everything
that sends a request), ``engine``, ``service``, ``cli``. Each module's imports
are read from its source (deferred imports inside functions count too), so a
shortcut taken anywhere fails here. Backend drivers and SQL stay under
``store/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "crawler"
LAYERS = ("core", "report", "store", "net", "engine", "service", "cli")
DRIVERS = ("sqlite3", "asyncpg")
# The package itself is the public facade: ``crawler.check`` is imported lazily from the API.
FACADE = {"crawler": {"crawler.engine", "crawler.engine.api"}}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "core"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


MODULES = _modules()


def test_the_layers_cover_the_package() -> None:
    assert {"crawler.store.sqlite.frontier", "crawler.store.postgres.frontier"} <= set(MODULES)
    assert {_layer(m) for m in MODULES} == set(LAYERS)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_higher_layer(module: str) -> None:
    rank = LAYERS.index(_layer(module))
    upward = sorted(
        name
        for name in _imports(MODULES[module], module)
        if name in MODULES
        and LAYERS.index(_layer(name)) > rank
        and name not in FACADE.get(module, set())
    )
    assert upward == [], f"{module} ({_layer(module)}) imports a higher layer"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_database_drivers_stay_in_the_store(module: str) -> None:
    if _layer(module) == "store":
        return
    drivers = sorted(
        name for name in _imports(MODULES[module], module) if name.split(".")[0] in DRIVERS
    )
    assert drivers == [], f"{module} imports a database driver outside crawler/store"


def test_the_backends_do_not_import_each_other() -> None:
    for module, path in MODULES.items():
        for this, other in (("sqlite", "postgres"), ("postgres", "sqlite")):
            if module.startswith(f"crawler.store.{this}"):
                crossing = [
                    n for n in _imports(path, module) if n.startswith(f"crawler.store.{other}")
                ]
                assert crossing == [], f"{module} imports the {other} backend"
