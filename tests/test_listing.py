"""The docs' lists of the registered benchmarks (README.md, docs/providers.md) are generated from the registry
(``python -m bedside.listing --write``): each lists every registered benchmark, and a stale one is named."""

from __future__ import annotations

import subprocess

from bedside import benchmarks, listing
from tests.conftest import REPO


def test_every_list_of_the_benchmarks_matches_the_registry():
    assert listing.problems(REPO) == [], "python -m bedside.listing --write"


def test_the_lists_name_every_registered_benchmark_where_its_page_and_scripts_are():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    providers = (REPO / "docs" / "providers.md").read_text(encoding="utf-8")
    for benchmark in benchmarks.all_benchmarks():
        assert f"[**{benchmark.title}**](bedside/{benchmark.name}/README.md)" in readme, benchmark.name
        assert f"| [{benchmark.title}](bedside/{benchmark.name}/README.md) | " in readme, benchmark.name
        assert f"- {benchmark.title}: [`bedside/{benchmark.name}/" in providers, benchmark.name
    assert all(f"`{task}`" in readme for task in ("discharge", "discharge_safety_probe", "medsp", "cpb_control"))
    assert "(../bedside/discharge/scripted.py)" in providers  # links from docs/ go up


def test_a_stale_list_is_named_and_rewritten(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)  # the pages: those git does not ignore
    page = tmp_path / "README.md"
    page.write_text("# x\n\n<!-- benchmarks: pages -->\n| stale |\n<!-- /benchmarks -->\ntext\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("no list\n", encoding="utf-8")
    assert listing.problems(tmp_path) == [
        "README.md: the list of benchmarks is stale (python -m bedside.listing --write)"
    ]
    assert listing.write(tmp_path) == [page] and listing.problems(tmp_path) == [] and listing.write(tmp_path) == []
    assert page.read_text(encoding="utf-8") == (
        f"# x\n\n<!-- benchmarks: pages -->\n{listing.pages(page, tmp_path)}<!-- /benchmarks -->\ntext\n"
    )
    assert [line.split("]")[0] for line in listing.pages(page, tmp_path).splitlines()[2:]] == [
        f"| [{b.title}" for b in benchmarks.all_benchmarks()
    ]
