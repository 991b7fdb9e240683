"""Write docs/reference/*.md (one page per input format) from the pydantic models.

    python scripts/gen_reference.py          # rewrite the pages
    python scripts/gen_reference.py --check  # exit 1 when a page is out of date

tests/test_reference_docs.py runs the check.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tierwise.cli.specs import PAGES, reference_page

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference"


def stale_pages() -> list[Path]:
    """Pages whose checked-in text differs from what the models generate."""
    return [
        path
        for name in PAGES
        if not (path := REFERENCE / f"{name}.md").exists()
        or path.read_text() != reference_page(name)
    ]


def main(argv: list[str]) -> int:
    """Rewrite the pages, or with --check list the stale ones (exit 1)."""
    if "--check" in argv:
        stale = stale_pages()
        for path in stale:
            print(f"out of date: {path} (run python scripts/gen_reference.py)")
        return 1 if stale else 0
    REFERENCE.mkdir(parents=True, exist_ok=True)
    for name in PAGES:
        (REFERENCE / f"{name}.md").write_text(reference_page(name))
        print(f"wrote {REFERENCE / name}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
