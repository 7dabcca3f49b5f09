"""README.md and docs/: each role's document is there and linked from the README, and every relative link (and
the heading it names) resolves. The README's commands are run by tests/e2e/test_readme.py."""
from __future__ import annotations

import re
from pathlib import Path

from graders.settings import PACKAGE_ROOT as ROOT

ROLES = ["student", "ta", "instructor", "worker-operator", "trust-model", "tracks"]
LINK = re.compile(r"\]\(([^)\s]+)\)")   # [text](target)


def slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(), flags=re.MULTILINE)}


def test_each_roles_document_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    missing = [role for role in ROLES
               if f"(docs/{role}.md)" not in readme or not (ROOT / "docs" / f"{role}.md").is_file()]
    assert missing == []


def test_every_relative_link_resolves():
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("tracks/*/README.md")),
             ROOT / "benchmarks" / "results" / "README.md"]
    broken = []
    for text in texts:
        for target in LINK.findall(text.read_text()):
            if "://" in target:
                continue
            name, _, anchor = target.partition("#")
            path = (text.parent / name).resolve() if name else text
            if not path.exists() or (anchor and anchor not in anchors(path)):
                broken.append(f"{text.relative_to(ROOT)}: {target}")
    assert broken == []
