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


def _import_structlog_without_rich() -> None:
    """Import structlog without letting it pull in rich and pygments.

    With the progress display imported only when shown (``cli._run``), this
    takes ``import crawler.cli`` from 55.5 to 52.6 MB of RSS.

    ``structlog.dev`` imports rich, when installed, for its exception
    formatter; our logs format exceptions themselves (``format_exc_info``
    runs before the renderer), so that formatter never runs. rich is still
    imported where the progress display needs it, on a terminal.
    """
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


_import_structlog_without_rich()
