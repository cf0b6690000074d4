"""README.md is a front door (at most 250 lines); every relative link in README.md, docs/*.md and
benchmarks/README.md points at a file that exists, and a `#heading` part at a heading of that file;
no page points at the development machine's shared folder."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 250

# [text](target) outside code; the target ends at the first space or ")".
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")


def _prose(text: str) -> str:
    """The page without fenced code blocks and inline code (links there are not links)."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else _INLINE_CODE.sub("", line))
    return "\n".join(out)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces -> '-'."""
    text = _INLINE_CODE.sub(lambda m: m.group(0)[1:-1], heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def relative_links(path: Path) -> list[str]:
    targets = _LINK.findall(_prose(path.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]  # http:, mailto: ...


def broken_links(path: Path) -> list[str]:
    bad = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            bad.append(f"{target}: no file {dest.relative_to(ROOT) if ROOT in dest.parents else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    return bad


def test_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_README_LINES}): move reference text to docs/")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_at_the_shared_folder(page):
    text = page.read_text(encoding="utf-8")
    assert "/work/shared" not in text and "../shared" not in text


def test_checker_sees_a_broken_file_and_a_broken_heading(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## Install on the robot\n")
    page.write_text("[a](other.md) [b](other.md#install-on-the-robot) [c](missing.md)\n"
                    "[d](other.md#no-such-heading) [e](https://example.org/x.md) `[f](gone.md)`\n"
                    "```\n[g](gone.md)\n```\n")
    bad = broken_links(page)
    assert len(bad) == 2 and "missing.md" in bad[0] and "#no-such-heading" in bad[1]


def test_slugs_follow_github():
    assert _slug("Changing k, N, S, mode live") == "changing-k-n-s-mode-live"
    assert _slug("The compile check: `python -m oxygen_ros.bench.gpu_compile`") == (
        "the-compile-check-python--m-oxygen_rosbenchgpu_compile")
    assert _slug("Execution modes (same weights, same code; scheduling differs, results do not)") == (
        "execution-modes-same-weights-same-code-scheduling-differs-results-do-not")
