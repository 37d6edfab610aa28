"""The docs stay navigable and true to the code: a README a newcomer reads to its end, links
that lead somewhere, and a CLI reference that is the code's own ``--help``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted([README, *(ROOT / "docs").rglob("*.md")])

FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text with fenced blocks and code spans removed: what is in code is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``path``: lower case, punctuation dropped,
    spaces as hyphens, a repeated heading suffixed ``-1``, ``-2``."""
    seen: dict[str, int] = {}
    found = set()
    for title in HEADING.findall(FENCE.sub("", path.read_text())):
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link: its text
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    return [target for target in LINK.findall(prose(path.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]  # http:, https:, mailto:


def test_the_readme_is_under_450_lines():
    lines = README.read_text().count("\n")
    assert lines < 450, f"README.md has {lines} lines: move detail to docs/"


def test_every_relative_link_in_the_readme_and_docs_leads_to_a_file_and_heading():
    broken = []
    for doc in DOCS:
        for target in relative_links(doc):
            file_part, _, anchor = target.partition("#")
            dest = (doc.parent / file_part).resolve() if file_part else doc
            where = f"{doc.relative_to(ROOT)}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where} (no heading #{anchor})")
    assert broken == []


def test_the_link_checker_sees_links_and_skips_code():
    sample = ROOT / "docs" / "operator-guide.md"
    assert "cli-reference.md" in relative_links(sample)
    assert LINK.findall(prose("`[not](a-link.md)` and [yes](b.md)")) == ["b.md"]
    assert "the-operators-hard-hour" in anchors(sample)


def test_the_cli_reference_is_what_the_code_prints_today():
    """docs/cli-reference.md is generated from the typer app (``make docs``); when an option
    changes in console/cli, regenerate it rather than edit it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRQ_")}
    env["PYTHONPATH"] = str(ROOT)
    fresh = subprocess.run(
        [sys.executable, "-m", "tools.cli_reference"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    committed = (ROOT / "docs" / "cli-reference.md").read_text()
    assert committed == fresh, "docs/cli-reference.md is stale: run `make docs`"
