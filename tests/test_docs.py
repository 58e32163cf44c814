"""docs/ stays a product: small, organised by purpose, every link resolving, the support matrix generated, no dated
run diaries (they live in git history)."""
import re
from pathlib import Path

import pytest

from compare import matrix

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LADDERS = ("wmma", "mma", "hopper", "sparse", "triton")
MAX_DOCS_BYTES = 3 * 1024 * 1024  # `du -sh docs` <= 3 MB
BLOCK = 4096  # du counts whole blocks


def _pages():
    return sorted(DOCS.rglob("*.md"))


def test_docs_stay_under_3_mb():
    files = [p for p in DOCS.rglob("*") if p.is_file()]
    used = sum(-(-p.stat().st_size // BLOCK) * BLOCK for p in files)
    assert used <= MAX_DOCS_BYTES, f"docs/ holds {used / 2**20:.2f} MB on disk, over 3 MB: raw runs belong in git history"


def test_docs_by_purpose():
    for page in ("usage.md", "harness.md", "kernels.md", "results/history.csv", "results/h100/index.md"):
        assert (DOCS / page).is_file(), page
    for ladder in LADDERS:
        assert (DOCS / "design" / f"{ladder}.md").is_file(), ladder
    assert not [p for p in (DOCS / "results").iterdir() if p.is_dir() and p.name.startswith("h100-")], \
        "raw run folders (docs/results/h100-<sha>-*) go to git history; append their bench.json to history.csv"


@pytest.mark.parametrize("ladder", LADDERS)
def test_design_doc_shape(ladder):
    """Each design doc: the idea of each step, one current table naming its commit, what is open, where the old logs
    are; no dated headings."""
    text = (DOCS / "design" / f"{ladder}.md").read_text()
    for heading in ("## What each", "## What is open", "## Old logs"):
        assert heading in text, f"{ladder}.md lacks {heading!r}"
    assert "commit" in text and "git checkout" in text
    dated = [h for h in re.findall(r"^#+ .*$", text, re.M) if re.search(r"\b20\d\d-\d\d-\d\d\b|\b[0-9a-f]{7}\b", h)]
    assert not dated, f"{ladder}.md has dated headings (run diaries go to git history): {dated}"


def test_kernels_md_matrix_is_generated():
    """docs/kernels.md embeds exactly what `python -m compare kernels` prints."""
    assert matrix.embedded((DOCS / "kernels.md").read_text()) == matrix.markdown(), \
        "docs/kernels.md's support matrix is stale: regenerate it with `python -m compare kernels --markers`"


def test_readme_is_short_and_its_matrix_is_generated():
    """The README is read in five minutes (at most 180 lines) and embeds the same generated support matrix."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 180
    assert matrix.embedded(text) == matrix.markdown(), \
        "README.md's support matrix is stale: paste `python -m compare kernels --markers` over it"


def test_the_matrix_is_the_same_with_and_without_the_interpreter():
    """The Gluon record is offered only outside the interpreter, yet the table lists it either way: the README's
    copy cannot depend on how it was generated."""
    from triton_kernels import variants

    assert variants.GLUON.name in {v.name for v in matrix.records()}


def test_matrix_lists_every_record_once():
    names = [r[0].strip("`") for r in matrix.rows()]
    assert len(names) == len(set(names)) and "torch.matmul" not in names
    assert {v.name for v in matrix.records()} == set(names)
    with pytest.raises(ValueError):
        matrix.embedded("no table here")


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", [p for p in _pages() if p.name != "index.md" or p.parent.parent.name != "results"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    """Every relative link of every page resolves (a report copied under results/<gpu>/ is as the command wrote
    it, and its README says which of its files were left out)."""
    broken = [t for t in LINK.findall(page.read_text()) if "://" not in t and not (page.parent / t).exists()]
    assert not broken, f"{page.relative_to(ROOT)}: links to nothing: {broken}"
