"""Rewrite the README's option table from crawler.options (run: make readme)."""

from __future__ import annotations

import re
from pathlib import Path

from crawler.cli.options import markdown_table

README = Path(__file__).resolve().parents[1] / "README.md"
text = README.read_text(encoding="utf-8")
updated = re.sub(
    r"(<!-- options-table:start -->\n).*?(<!-- options-table:end -->)",
    lambda m: m.group(1) + markdown_table() + m.group(2),
    text,
    flags=re.S,
)
README.write_text(updated, encoding="utf-8")
