"""Which packages the wheel holds, found rather than listed (the rest of the metadata is pyproject.toml's).

tasks/, solvers/ and scorers/ are installed as bedside.tasks, bedside.solvers and bedside.scorers;
prompts/ and datasets/ ship as package data (bedside/_prompts, bedside/_datasets) for non-editable
installs. Every folder with an ``__init__.py`` under these roots is a package of the wheel, so a new
benchmark's folders (``bedside/<b>/``, ``solvers/<b>/``, ...) need no edit here or in pyproject.toml.
"""

from setuptools import find_packages, setup

#: installed package -> folder of the repository
PACKAGE_DIR = {
    "bedside": "bedside",
    "bedside.tasks": "tasks",
    "bedside.solvers": "solvers",
    "bedside.scorers": "scorers",
    "bedside._prompts": "prompts",
    "bedside._datasets": "datasets",
}
#: data-only roots (no ``__init__.py``): packaged whole through pyproject's package-data globs
DATA_PACKAGES = ("bedside._prompts", "bedside._datasets")


def packages() -> list[str]:
    found = []
    for package, folder in PACKAGE_DIR.items():
        if package in DATA_PACKAGES:
            found.append(package)
            continue
        found += [package, *(f"{package}.{sub}" for sub in find_packages(folder))]
    return sorted(set(found))


if __name__ == "__main__":
    setup(packages=packages(), package_dir=PACKAGE_DIR)
