"""docs/layout.md lists every package and every folder inside one, so a newcomer finds
each from one page; a new package without its line there fails here."""

from __future__ import annotations

from pathlib import Path

import infersight

ROOT = Path(infersight.__file__).parent
LAYOUT = Path(__file__).parents[2] / "docs" / "layout.md"


def test_layout_doc_names_every_package() -> None:
    text = LAYOUT.read_text()
    packages = sorted(
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in ROOT.rglob("__init__.py")
        if p.parent != ROOT
    )
    missing = [name for name in packages if f"- `{name}`:" not in text]
    assert missing == [], f"add a line to docs/layout.md for: {missing}"
