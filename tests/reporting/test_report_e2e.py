"""``python -m bedside report`` end to end: a real DischargeBench run with the scripted model for every
role (2 short sessions), plus synthetic MedSP1000 and CPB-Bench logs in the same directory; the numbers agree
with Inspect's own metrics and usage totals, and the HTML renders in a headless browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from inspect_ai import eval
from inspect_ai.log import read_eval_log
from inspect_ai.scorer import Score

from bedside.tasks.discharge import discharge
from tests.conftest import bedside_command, metrics_of, scripted
from tests.reporting.synth import log, sample, write

pytestmark = pytest.mark.eval

CHROMIUM = Path("/usr/bin/chromium")
FIGURES = [
    "fig2_icd_chapter",
    "fig3_personality",
    "fig3_education_level",
    "fig3_health_literacy",
    "fig3_recall_level",
    "fig4_outcomes",
    "fig4_erroneous_by_axis",
    "fig14_erroneous_by_icd_chapter",
]


def build_run(root: Path) -> tuple[str, Path]:
    logs, out = root / "logs", root / "report"
    logs.mkdir(parents=True, exist_ok=True)
    # short sessions (the educator covers two topics, then signs off): fast, and they exercise the audit
    [result] = eval(
        discharge(min_turns=4),
        model=scripted(educator_topics=2),
        model_roles={"patient": scripted(), "monitor": scripted(), "grader": scripted()},
        limit=2,
        log_dir=str(logs),
        display="none",
    )
    assert result.status == "success", result.error
    medsp_counts = {c: [0, 0] for c in ("PC", "MK", "SBP", "ICS", "PBLI", "PROF")} | {"PC": [2, 3]}
    write(
        log(
            "bedside/medsp",
            "prov/m",
            [
                sample(
                    "s1",
                    {
                        "medsp_rubric": Score(
                            value={"micro": 2 / 3, "scenario_mean": 2 / 3}, metadata={"counts": medsp_counts}
                        )
                    },
                    {"specialty": "Pediatrics"},
                )
            ],
        ),
        logs / "medsp.eval",
    )
    write(
        log(
            "bedside/cpb",
            "prov/c",
            [
                sample(
                    f"p{i}",
                    {"cpb_failure": Score(value={"failure": float(i % 2)})},
                    {"category": "care_resistance", "dataset": "ACI", "language": "en"},
                )
                for i in range(4)
            ],
        ),
        logs / "cpb.eval",
    )
    done = bedside_command("report", str(logs), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    return result.location, out


def check_files_written(run):
    _, out = run
    for name in FIGURES:
        assert (out / f"{name}.png").stat().st_size > 0 and (out / f"{name}.svg").stat().st_size > 0
    for name in (
        "table1.csv",
        "table1_wide.csv",
        "audit.csv",
        "usage_by_role.csv",
        "usage_by_case.csv",
        "cost_per_case.csv",
        "medsp.csv",
        "cpb.csv",
        "fig4_end_reasons.csv",
    ):
        assert (out / name).exists(), name
    page = (out / "index.html").read_text()
    for name in FIGURES:
        assert f'src="{name}.png"' in page
    # each caption links its figure's table, but fig4_outcomes' (its two tables follow, each with its CSV)
    captions = re.findall(r"<figcaption>.*?</figcaption>", page, re.S)
    tables = [found.group(1) for c in captions if (found := re.search(r'<a href="([^"]+\.csv)">CSV</a>', c))]
    assert len(captions) == len(FIGURES) and len(tables) == len(FIGURES) - 1
    assert all((out / table).exists() for table in tables)
    assert "MedSP1000" in page and "CPB-Bench" in page and "EXAMPLE prices" in page


def check_no_figures_writes_the_same_tables_without_drawing(run, tmp_path):
    """``--no-figures``: every CSV as the full report's, byte for byte; no image; each figure's caption says so."""
    _, out = run
    bare = tmp_path / "bare"
    done = bedside_command("report", str(out.parent / "logs"), "--out", str(bare), "--no-figures")
    assert done.returncode == 0, done.stdout + done.stderr
    tables = sorted(p.name for p in out.glob("*.csv"))
    assert tables and sorted(p.name for p in bare.glob("*.csv")) == tables
    for name in tables:
        assert (bare / name).read_bytes() == (out / name).read_bytes(), name
    assert not list(bare.glob("*.png")) and not list(bare.glob("*.svg"))
    page = (bare / "index.html").read_text()
    assert page.count("not drawn (bedside report --no-figures)") == len(FIGURES)
    assert "<img" not in page
    for name in FIGURES:  # the figure's table is linked where the figure would be
        if name != "fig4_outcomes":
            assert f'<a href="{name}.csv">{name}.csv</a>' in page, name


def check_table1_agrees_with_inspects_metrics(run):
    log_, out = run
    table = pd.read_csv(out / "table1.csv").set_index("key")
    for key in ("naturalness", "tcs", "comprehension", "rouge_l", "cosine", "readability"):
        metrics = metrics_of(log_, key)
        assert table.loc[key, "mean"] == pytest.approx(metrics["mean"])
        assert table.loc[key, "n"] == metrics["n"]
        assert table.loc[key, "ci_lower"] == pytest.approx(metrics["ci_lower"], nan_ok=True)
        assert table.loc[key, "ci_upper"] == pytest.approx(metrics["ci_upper"], nan_ok=True)
    wide = pd.read_csv(out / "table1_wide.csv").iloc[0]
    assert wide["n"] == 2 and wide["system_failures"] == 0


def check_usage_agrees_with_inspects_role_usage(run):
    log_, out = run
    by_role = pd.read_csv(out / "usage_by_role.csv").set_index("role")
    for role, usage in log_.stats.role_usage.items():
        assert by_role.loc[role, "input_tokens"] == usage.input_tokens
        assert by_role.loc[role, "output_tokens"] == usage.output_tokens
    total = log_.stats.model_usage["bedside/scripted"]
    roles = sum(u.input_tokens for u in log_.stats.role_usage.values())
    assert by_role.loc["educator", "input_tokens"] == total.input_tokens - roles
    assert (by_role["cost"] == 0).all() and (by_role["cases"] == 2).all()
    per_case = pd.read_csv(out / "cost_per_case.csv")
    assert per_case["total_tokens"].sum() == by_role["total_tokens"].sum()


def check_audit_and_outcomes(run):
    log_, out = run
    audit = pd.read_csv(out / "audit.csv").iloc[0]
    outcome = {str(s.id): s.scores["encounter_outcome"] for s in log_.samples}
    tcs = {str(s.id): s.scores["topic_checklist"].value["tcs"] for s in log_.samples}
    clean = [i for i, o in outcome.items() if o.answer == "clean_complete"]
    short = [i for i in clean if outcome[i].value["short_session"] == 1.0]
    low = [i for i in short if tcs[i] < 0.5]
    assert (audit["clean_complete"], audit["short"], audit["low_tcs_short"]) == (len(clean), len(short), len(low))
    assert short, "the short scripted sessions should show in the audit"
    assert str(audit["short_ids"]).split() == short
    assert str(audit["low_tcs_short_ids"]).split() == low or (
        not low and audit["low_tcs_short_ids"] != audit["low_tcs_short_ids"]
    )
    outcomes = pd.read_csv(out / "fig4_outcomes.csv").iloc[0]
    assert (
        outcomes["sessions"] == 2
        and outcomes["clean_complete"] + outcomes["erroneous"] + outcomes["system_failures"] == 2
    )


IMAGE_CHECK = """<script>
window.addEventListener("load", function () {
  var images = Array.from(document.images);
  var broken = images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                     .map(function (i) { return i.getAttribute("src"); });
  var marker = document.createElement("pre");
  marker.id = "bedside-image-check";
  marker.textContent = "IMAGES=" + JSON.stringify({count: images.length, broken: broken});
  document.body.appendChild(marker);
});
</script>"""


def rendered_images(page: Path, tmp_path: Path) -> dict:
    """Load ``page`` in headless Chromium; the injected script reports every <img> that did not load."""
    done = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    found = re.search(r"IMAGES=(\{.*?\})</pre>", done.stdout)
    assert found, f"no marker in Chromium's DOM (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"'))


def check_html_renders_without_broken_images_in_chromium(run, tmp_path):
    _, out = run
    html = (out / "index.html").read_text()
    checked = out / "_image_check.html"  # next to index.html, so that the relative image paths resolve
    checked.write_text(html.replace("</body>", IMAGE_CHECK + "</body>"))
    result = rendered_images(checked, tmp_path)
    assert result == {"count": len(FIGURES), "broken": []}
    # the check sees a broken image (so that the assertion above is not vacuous)
    checked.write_text(
        html.replace('src="fig2_icd_chapter.png"', 'src="missing.png"').replace("</body>", IMAGE_CHECK + "</body>")
    )
    assert rendered_images(checked, tmp_path)["broken"] == ["missing.png"]
    checked.unlink()
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_report_end_to_end(tmp_path):
    """One test, so that pytest-xdist runs the scripted evaluation once (a module fixture would run
    on every worker that picks one of the checks)."""
    location, out = build_run(tmp_path)
    run = (read_eval_log(location), out)
    check_files_written(run)
    check_no_figures_writes_the_same_tables_without_drawing(run, tmp_path)
    check_table1_agrees_with_inspects_metrics(run)
    check_usage_agrees_with_inspects_role_usage(run)
    check_audit_and_outcomes(run)
    if CHROMIUM.exists():
        check_html_renders_without_broken_images_in_chromium(run, tmp_path)


if not CHROMIUM.exists():  # defined only then: says loudly that the render check did not run

    def test_render_check_needs_chromium():
        pytest.skip(
            "/usr/bin/chromium is absent, so the report's HTML was not opened in a browser: install Debian's "
            "chromium (apt-get install -y chromium; the Makefile's test target does it)"
        )
