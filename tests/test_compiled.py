"""The compiled build (setup.py): the modules it lists exist, and `make test-compiled` runs them."""

from __future__ import annotations

import ast
import importlib
import os
import pickle
from pathlib import Path

import pytest

from crawler.config import CrawlSettings
from crawler.scope import Scope

ROOT = Path(__file__).resolve().parents[1]


def _compiled_paths() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "COMPILED":
            paths = ast.literal_eval(node.value)
            assert isinstance(paths, list)
            return [str(path) for path in paths]
    raise AssertionError("setup.py lists no COMPILED modules")


def test_every_module_listed_for_compiling_exists() -> None:
    for path in _compiled_paths():
        assert (ROOT / path).is_file(), path


@pytest.mark.skipif(
    not os.environ.get("CRAWLER_EXPECT_COMPILED"), reason="`make test-compiled` runs this"
)
def test_the_listed_modules_run_compiled() -> None:
    for path in _compiled_paths():
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        assert str(module.__file__).endswith(".so"), module.__file__


def test_a_scope_reaches_a_parse_helper_as_it_was_built() -> None:
    # A parse helper gets the crawl's Scope by pickle: a compiled frozen
    # dataclass cannot be unpickled field by field (the helper died on it).
    settings = CrawlSettings(exclude=["/private/"], max_depth=3)
    scope = Scope.build(settings, ["http://127.0.0.1:8000/docs/"])
    first = scope.classify_link("a.html", "http://127.0.0.1:8000/docs/", "utf-8",
                                element="a", depth=1)  # fmt: skip
    copy = pickle.loads(pickle.dumps(scope))  # noqa: S301 - our own bytes
    assert (copy.hosts, copy.prefixes, copy.max_depth) == (scope.hosts, scope.prefixes, 3)
    assert copy.classify_link("a.html", "http://127.0.0.1:8000/docs/", "utf-8",
                              element="a", depth=1) == first  # fmt: skip
    assert copy.classify_link("/private/x", "http://127.0.0.1:8000/docs/", "utf-8",
                              element="a", depth=1).reason == "excluded by filter"  # fmt: skip
