"""crawler: a recursive website link checker whose frontier lives on disk.

The library call is ``crawler.check(url, **options) -> crawler.Report`` (and
``await crawler.check_async(...)``); see ``crawler.engine.api``. They are
imported on first use, so ``import crawler`` stays light.
"""

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawler.engine.api import Report, check, check_async

__version__ = "0.1.0"
__all__ = ["Report", "__version__", "check", "check_async"]
_API = frozenset({"Report", "check", "check_async"})


def __getattr__(name: str) -> Any:
    """``crawler.check`` and friends, imported when first used."""
    if name in _API:
        from crawler.engine import api  # the facade may reach the top: imported lazily

        return getattr(api, name)
    raise AttributeError(f"module 'crawler' has no attribute {name!r}")


class _NoRichForStructlog:
    """An import hook: ``structlog.dev`` finds no rich, every other importer does.

    ``structlog.dev`` imports rich, when installed, for its exception
    formatter; our logs format exceptions themselves (``format_exc_info``
    runs before the renderer), so that formatter never runs, and rich with
    pygments is ~3 MB of RSS a crawl without a terminal never uses. rich is
    still imported where the progress display needs it, on a terminal.

    A hook rather than importing structlog here: ``import crawler`` stays
    cheap (``crawler --version`` imports nothing else), and whichever module
    imports structlog first, the hook applies. It costs nothing once rich is
    imported (the import system asks no finder for a loaded module).
    """

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "rich" and _importing_from("structlog.dev"):
            raise ModuleNotFoundError("rich is not loaded for structlog's tracebacks", name=name)


def _importing_from(module: str) -> bool:
    """Is ``module``'s body on the stack (running an import statement now)?"""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == module and frame.f_code.co_name == "<module>":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


if not any(isinstance(finder, _NoRichForStructlog) for finder in sys.meta_path):
    sys.meta_path.insert(0, _NoRichForStructlog())
