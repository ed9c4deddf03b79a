"""Text inside a Markdown table cell, escaped once for every Markdown output (the
summary and the level notes)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["md_cell"]


#: What could start an HTML tag or entity; only these are escaped, so text such as
#: "lag 9 ms > 5 ms" reads as written in the file and on GitHub (no &gt; entities).
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?[A-Za-z0-9]+;)")


def md_cell(text: Any) -> str:
    """Text safe inside a Markdown table cell: pipes, newlines and anything that could
    start HTML neutralised with a backslash (CommonMark), never with entities."""
    s = str(text).replace("\r", " ").replace("\n", " ")
    s = _HTML_START.sub(lambda m: "\\" + m.group(0), s)
    return s.replace("|", "\\|").replace("`", "'")
