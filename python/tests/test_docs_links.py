"""The README is one screen and every link it and the guide give leads somewhere.

The README keeps the two commands of a fresh machine on its first screen and stays under 100
lines (the rest is docs/guide.md); a relative link in either, or in any page under docs/,
names a file of the repository, and a `#fragment` names a heading of that page (GitHub's
anchor rule: lower case, punctuation dropped, spaces to hyphens).
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")
MAX_README_LINES = 100
FIRST_SCREEN = 25


def anchor(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set:
    out = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(anchor(line.lstrip("#")))
    return out


def broken_links(page: Path) -> list:
    bad = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    return bad


def test_readme_is_one_screen_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"
    first = "\n".join(lines[:FIRST_SCREEN])
    assert "make demo" in first and "make test" in first, first
    assert "docs/guide.md" in "\n".join(lines)


def test_every_relative_link_resolves():
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    bad = [b for p in pages for b in broken_links(p)]
    assert not bad, "\n".join(bad)


def test_the_link_checker_sees_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A heading\n[ok](#a-heading) [no](missing.md) [frag](#nowhere)\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        bad = broken_links(page)
    finally:
        ROOT = saved
    assert len(bad) == 2 and "missing.md" in bad[0] and "#nowhere" in bad[1], bad
