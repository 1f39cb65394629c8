"""``bedside study``: a blinded clinician study from the runs of models and physicians on the same cases
(docs/clinician-study.md). One folder of runs per condition; then:

    bedside study build logs/study/model/ logs/study/physicians/ --raters ann,bob --k 2 --seed 1 --out study/
    bedside study serve study/
    bedside study report study/
    bedside study label-studio export study/ --out study-label-studio/

``build`` writes the study folder (:mod:`bedside.study.build`: the design, each rater's packet and ratings
template, the key held apart); ``report`` (``bedside study report STUDY [RATINGS.csv...]``; no file: the
templates filled in where they are, ``STUDY/raters/<rater>/ratings.csv``) checks the raters' ratings against it
(:mod:`bedside.study.ratings`) and prints the analysis (:mod:`bedside.study.analysis`; ``bedside report --study``
adds it to the report, :mod:`bedside.study.report`); ``serve`` serves bedside's rating page, one link per rater
(:mod:`bedside.study.page`), whose answers go to the raters' journals in the study folder, which ``report`` reads
besides the ratings files; ``label-studio export`` writes the study as Label Studio projects, and ``label-studio
import STUDY EXPORT.json... --out ratings.csv`` reads their JSON exports back as ratings
(:mod:`bedside.study.label_studio`). Bad input is refused in one line, exit code 2, before anything is written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bedside.cli import bad_input
from bedside.study.analysis import HEADINGS, analyse, summary
from bedside.study.build import RATING_COLUMNS, StudyError, build
from bedside.study.journal import working_time
from bedside.study.label_studio import export, import_ratings
from bedside.study.page import RatingDesk
from bedside.study.ratings import Study, read_study


def run_build(args: argparse.Namespace) -> int:
    with bad_input("study build", StudyError):
        design = build(args.logs, [r for r in args.raters.split(",") if r], args.k, args.seed, Path(args.out))
    print(
        f"wrote a study of {design['conditions']} conditions x {len(design['cases'])} cases, "
        f"{len(design['tasks'])} tasks for {len(design['raters'])} raters (k = {design['k']}) to {args.out}: "
        "raters/<name>/ goes to each rater; key/ stays with you"
    )
    return 0


def run_report(args: argparse.Namespace) -> int:
    with bad_input("study report", StudyError):
        study, ratings = read_study(args.study, args.ratings)
    table = analyse(study, ratings, seed=args.seed)
    print(summary(study, ratings))
    spent = working_time(study.folder, study.design["raters"])
    if spent:
        print(spent)
    for section, heading in HEADINGS:
        rows = table[table["section"] == section]
        if rows.empty:
            continue
        print(f"\n{heading}")
        shown = rows.drop(columns="section").copy()
        for column in ("estimate", "low", "high"):
            shown[column] = shown[column].map(lambda v: f"{v:.3f}")
        print(shown.to_string(index=False))
    if args.csv:
        table.to_csv(args.csv, index=False)
        print(f"\nwrote {args.csv}")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    with bad_input("study serve", StudyError):
        desk = RatingDesk(Path(args.study), args.port)
    print(f"{desk.design['title']} clinician study: the rating page, on this machine only; each link is its rater's:")
    for name, rater in desk.raters.items():
        done, total = desk.progress(rater)
        print(f"  {name}: {desk.link(name)}  ({done} of {total} tasks sent)")
    print("Answers go to raters/<name>/journal.jsonl; bedside study report reads them. Ctrl+C stops the page;")
    print("bedside study serve again brings back the same links, answers and progress.", flush=True)
    try:
        desk.server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def run_label_studio_export(args: argparse.Namespace) -> int:
    with bad_input("study label-studio export", StudyError):
        written = export(Study.load(args.study), Path(args.out))
    print(f"wrote {written[0]} and {len(written) - 1} raters' tasks to {args.out}: one Label Studio project per rater")
    return 0


def run_label_studio_import(args: argparse.Namespace) -> int:
    with bad_input("study label-studio import", StudyError):
        ratings = import_ratings(Study.load(args.study), args.exports)
    ratings[list(RATING_COLUMNS)].to_csv(args.out, index=False)
    print(f"wrote {len(ratings)} ratings of {ratings['rater'].nunique()} raters to {args.out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    study = sub.add_parser(
        "study",
        help="a blinded clinician study: build it from runs, analyse the raters' ratings",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = study.add_subparsers(dest="action", required=True)
    build = actions.add_parser("build", help="the study folder from runs of several conditions on the same cases")
    build.add_argument("logs", nargs="+", metavar="LOG_OR_DIR", help="one run per condition (a log or a run's folder)")
    build.add_argument("--raters", required=True, metavar="NAME,...", help="the raters' names")
    build.add_argument("--k", type=int, required=True, help="how many raters rate each case")
    build.add_argument(
        "--seed", type=int, default=0, help="seed of the codes, the assignment and the sides (default 0)"
    )
    build.add_argument("--out", required=True, metavar="DIR", help="the study folder (new, or empty)")
    build.set_defaults(func=run_build)
    report = actions.add_parser("report", help="the analysis of the raters' ratings")
    report.add_argument("study", metavar="STUDY", help="the study folder")
    report.add_argument(
        "ratings",
        nargs="*",
        metavar="RATINGS",
        help="ratings CSV files (the templates filled in; default: the raters' templates in the study folder), "
        "besides the rating page's journals in the study folder",
    )
    report.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    report.add_argument("--csv", metavar="FILE.csv", help="also write every number to this CSV")
    report.set_defaults(func=run_report)
    serve = actions.add_parser("serve", help="the rating page: one link per rater, their answers into the study")
    serve.add_argument("study", metavar="STUDY", help="the study folder")
    serve.add_argument(
        "--port", type=int, help="the page's port on 127.0.0.1 (default: the one this study used, else a free one)"
    )
    serve.set_defaults(func=run_serve)
    platform = actions.add_parser(
        "label-studio", help="the study as Label Studio projects, and their exports read back"
    )
    steps = platform.add_subparsers(dest="step", required=True)
    export = steps.add_parser("export", help="label_config.xml and one task file per rater")
    export.add_argument("study", metavar="STUDY", help="the study folder")
    export.add_argument("--out", required=True, metavar="DIR", help="where to write them")
    export.set_defaults(func=run_label_studio_export)
    back = steps.add_parser("import", help="Label Studio JSON exports as a ratings CSV")
    back.add_argument("study", metavar="STUDY", help="the study folder")
    back.add_argument("exports", nargs="+", metavar="EXPORT.json", help="Label Studio JSON exports (one per project)")
    back.add_argument("--out", required=True, metavar="FILE.csv", help="the ratings CSV to write")
    back.set_defaults(func=run_label_studio_import)
