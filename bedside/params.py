"""Task parameters (``-T name=value``): typed in the task function's signature, described once (in its
docstring, or, for a parameter several tasks share, by its shared type: :data:`SHARED`), checked before the
task reads any data, and documented in tables generated from both.

What Inspect (0.3.285) does with a task's parameters: ``inspect eval -T`` YAML-parses each value and
splits an unquoted comma into a list (``-T max_turns=5`` is the int 5, ``-T max_turns=abc`` the string
``'abc'``, ``-T max_turns=true`` a bool, ``-T dataset=ACI,MedDG`` the list ``['ACI', 'MedDG']``); ``@task``
records the parameters' names only, and the task is called with whatever came. No annotation is read:
nothing is converted or checked, and ``inspect list tasks`` shows the decorator's attributes, not the
parameters. So bedside does the rest here:

- :func:`validate_parameters` (under ``@task`` on every task function) reads the signature's
  annotations (``Literal[...]`` choices, ``PositiveInt`` / ``Annotated[int, Field(ge=0, le=10)]``
  bounds, ``bool``, ``str``, lists of choices) and validates every argument with pydantic before the
  task body runs; a bad value raises :class:`BadParameter`: one line naming the parameter, e.g.
  ``Bad parameter 'behavior': use one of none, contradiction, ..., got behavior='bogus'``.
- ``python -m bedside.params --markdown TASK`` prints a task's parameter table (name, type or allowed
  values, default, meaning: the docstring's ``Args:`` entry); ``--write`` rewrites every table between
  ``<!-- parameters: TASK -->`` and ``<!-- /parameters -->`` in the repository's Markdown files (any
  file, any folder, tracked or new: whatever git does not ignore); ``--check`` lists the
  tables that differ and the tasks with no table (tests/test_params.py fails on either). To give a
  page a task's table, write the two marker lines where it belongs and run ``--write``.

:class:`BadParameter` (like the loaders' data errors, via :class:`SetupError`) subclasses Inspect's
``PrerequisiteError``, which the ``inspect eval`` CLI prints as a plain message (no Python traceback,
exit status 1); it is also a ``ValueError`` for callers that catch that. (Inspect prints such
messages through its rich console, so with ``--display none`` it prints nothing; the exit status is
still 1.)
"""

from __future__ import annotations

import argparse
import functools
import inspect
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

import annotated_types
import docstring_parser
from pydantic import ConfigDict, Field, NonNegativeInt, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from rich.markup import escape

from bedside import benchmarks
from bedside.compat import PrerequisiteError
from bedside.protocols import ReadingRule


class SetupError(PrerequisiteError, ValueError):
    """An error in what the user asked for (a parameter, a data file), found while the task is
    built. ``inspect eval`` prints a ``PrerequisiteError`` as a plain message, without a Python
    traceback (it renders ``.message`` as rich markup, so that copy is escaped; ``str()`` and
    ``args`` hold the plain text)."""

    def __init__(self, message: str) -> None:
        super().__init__(escape(message))
        self.args = (message,)

    def __str__(self) -> str:
        return str(self.args[0])


class BadParameter(SetupError):
    """A task parameter with an unusable value; the message is one line naming the parameter."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"Bad parameter {name!r}: {problem}")
        self.name = name
        self.problem = problem

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self.problem))


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` on one line, shortened to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check(cond: bool, name: str, msg: str) -> None:
    """Raise :class:`BadParameter` naming ``name`` with ``msg`` unless ``cond`` holds (a rule that
    involves several parameters, which no single annotation can say)."""
    if not cond:
        raise BadParameter(name, msg)


def comma_list(value: Any) -> Any:
    """A text of comma-separated values as their list (a Python caller's ``"ACI,MedDG"``; ``-T``
    splits an unquoted comma itself); anything else unchanged. For ``Annotated[list[...],
    BeforeValidator(comma_list)]``."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


# --- what an annotation allows -------------------------------------------------------------------
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
#: pydantic's conversions, plus a plain number where text is meant (``-T data=2024`` is the int 2024)
_CONFIG = ConfigDict(coerce_numbers_to_str=True)

Kind = Literal["choice", "choices", "integer", "boolean", "text"]


def _without_none(annotation: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None`` (``Annotated[X | None, ...]``: ``(Annotated[X, ...], True)``);
    ``(annotation, False)`` otherwise."""
    if get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        stripped, optional = _without_none(base)
        return (Annotated[(stripped, *extra)] if optional else annotation), optional
    if get_origin(annotation) in (Union, types.UnionType):
        members = get_args(annotation)
        rest = tuple(m for m in members if m is not type(None))
        if len(rest) < len(members):
            return (rest[0] if len(rest) == 1 else Union[rest]), True  # noqa: UP007 (a runtime union)
    return annotation, False


def _unannotated(annotation: Any) -> tuple[Any, list[Any]]:
    """The type under ``Annotated[...]`` and its metadata (a ``Field(...)``'s constraints flattened)."""
    metadata: list[Any] = []
    while get_origin(annotation) is Annotated:
        annotation, *extra = get_args(annotation)
        for item in extra:
            metadata += item.metadata if isinstance(item, FieldInfo) else [item]
    return annotation, metadata


def _described(annotation: Any) -> str:
    """The description its type gives a parameter (``Field(description=...)``: a shared parameter's), or ''."""
    while get_origin(annotation) is Annotated:
        annotation, *extra = get_args(annotation)
        for item in extra:
            if isinstance(item, FieldInfo) and item.description:
                return " ".join(item.description.split())
    return ""


@dataclass(frozen=True)
class ParameterType:
    """What one task parameter's annotation allows, read once from the signature."""

    name: str
    annotation: Any
    optional: bool
    kind: Kind
    #: the allowed values of a choice (or of each element of a list of choices)
    choices: tuple[Any, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    #: what its type says it means (a shared parameter's description), or ''
    description: str = ""

    @classmethod
    def of(cls, name: str, annotation: Any) -> ParameterType:
        inner, optional = _without_none(annotation)
        core, metadata = _unannotated(inner)
        minimum = maximum = None
        for item in metadata:
            if isinstance(item, annotated_types.Ge):
                minimum = cast(int, item.ge)
            elif isinstance(item, annotated_types.Gt):
                minimum = cast(int, item.gt) + 1
            elif isinstance(item, annotated_types.Le):
                maximum = cast(int, item.le)
            elif isinstance(item, annotated_types.Lt):
                maximum = cast(int, item.lt) - 1
        kind: Kind
        choices: tuple[Any, ...] = ()
        if get_origin(core) is Literal:
            kind, choices = "choice", get_args(core)
        elif get_origin(core) is list and get_origin(_unannotated(get_args(core)[0])[0]) is Literal:
            kind, choices = "choices", get_args(_unannotated(get_args(core)[0])[0])
        elif core is bool:
            kind = "boolean"
        elif core is int:
            kind = "integer"
        elif core is str:
            kind = "text"
        else:
            raise TypeError(f"parameter {name!r}: bedside cannot check or document the type {annotation!r}")
        return cls(name, inner, optional, kind, choices, minimum, maximum, _described(annotation))

    @functools.cached_property
    def adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.annotation, config=_CONFIG)

    def validate(self, value: Any) -> Any:
        """``value`` as the annotation's type (pydantic's conversions: ``"5"`` → 5, ``"yes"`` → True),
        or :class:`BadParameter`. Beyond pydantic: surrounding spaces are ignored; a bool or a text
        that is not a plain whole number is no integer (``-T n=true``, ``"1e3"``); a text parameter
        that ``-T`` split at its commas is joined again."""
        if value is None and self.optional:
            return None
        if isinstance(value, str):
            value = value.strip()
        if self.kind == "text" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        if self.kind == "integer" and (
            isinstance(value, bool) or (isinstance(value, str) and not _INT_TEXT.fullmatch(value))
        ):
            raise self.bad("expected a whole number", value)
        try:
            return self.adapter.validate_python(value)
        except ValidationError as error:
            raise self.refusal(error, value) from None

    def bad(self, problem: str, value: Any) -> BadParameter:
        return BadParameter(self.name, f"{problem}, got {self.name}={shown(value)}")

    def refusal(self, error: ValidationError, value: Any) -> BadParameter:
        """pydantic's first complaint, in one line."""
        first = error.errors(include_url=False)[0]
        kind, given = first["type"], first.get("input", value)
        if kind == "literal_error":
            return self.bad(f"use one of {', '.join(map(str, self.choices))}", given)
        if kind in ("greater_than_equal", "greater_than"):
            return self.bad(f"must be at least {self.minimum}", int(given))
        if kind in ("less_than_equal", "less_than"):
            return self.bad(f"must be at most {self.maximum}", int(given))
        if kind.startswith("int_"):
            return self.bad("expected a whole number", given)
        if kind.startswith("bool_"):
            return self.bad("expected true/false/yes/no/1/0", given)
        if kind.startswith("string_"):
            return self.bad("expected text", given)
        if kind == "list_type":
            return self.bad(f"expected one or more of {', '.join(map(str, self.choices))}", given)
        return self.bad(first["msg"], given)

    def values(self) -> str:
        """The allowed values, for a parameter table."""
        listed = ", ".join(f"`{_text(c)}`" for c in self.choices)
        if self.kind == "choice":
            return listed
        if self.kind == "choices":
            return f"one or more of {listed}"
        if self.kind == "boolean":
            return "`true`, `false`"
        if self.kind == "integer":
            if self.minimum is not None and self.maximum is not None:
                return f"integer {self.minimum}–{self.maximum}"
            if self.minimum is not None:
                return f"integer ≥ {self.minimum}"
            return "integer"
        return "text"


def _text(value: Any) -> str:
    """A value as it is written after ``-T name=``."""
    return str(value).lower() if isinstance(value, bool) else str(value)


F = TypeVar("F", bound=Callable[..., Any])


def parameter_types(function: Callable[..., Any]) -> dict[str, ParameterType]:
    """Each parameter of ``function`` (a task function, ``@task``-wrapped or not) and what its
    annotation allows; a parameter without an annotation is a ``TypeError``."""
    function = inspect.unwrap(function)
    hints = get_type_hints(function, include_extras=True)
    found = {}
    for name in inspect.signature(function).parameters:
        if name not in hints:
            raise TypeError(f"parameter {name!r} of {function.__qualname__} has no type annotation")
        found[name] = ParameterType.of(name, hints[name])
    return found


def validate_parameters(task_function: F) -> F:
    """Validate every argument of ``task_function`` against its annotation before the body runs
    (:meth:`ParameterType.validate`); the body gets the converted values. Put it under ``@task``.
    A missing required parameter is a :class:`BadParameter` too (not Python's ``TypeError``); a
    default that its own annotation refuses fails here, when the module is imported."""
    signature = inspect.signature(task_function)
    checks = parameter_types(task_function)
    for name, parameter in signature.parameters.items():
        if parameter.default is not inspect.Parameter.empty:
            checks[name].validate(parameter.default)

    required = [name for name, p in signature.parameters.items() if p.default is inspect.Parameter.empty]

    @functools.wraps(task_function)
    def validated(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        for name in required:
            if name not in bound.arguments:
                raise BadParameter(name, f"required (-T {name}=...)")
        for name, value in bound.arguments.items():
            bound.arguments[name] = checks[name].validate(value)
        return task_function(*bound.args, **bound.kwargs)

    return cast(F, validated)


# --- the parameters several tasks share, described once ----------------------------------------------
#: what each shared parameter means in every task that has it: a task types the parameter with its alias below
#: (``parse_retries: ParseRetries = 2``) and its table shows this description, followed by ``Here:`` and the
#: task's own ``Args:`` entry when it has one (what is particular to that task)
SHARED: dict[str, str] = {
    "parse_retries": "fresh samples asked for when a model's reply (not a judge's) is empty or not readable.",
    "judge_retries": "fresh samples asked for when a judge reply is not readable; then what it judges is "
    "unscored and counted (the health block), never scored 0.",
    "structured_output": "``true``: request every JSON reply through Inspect's structured output "
    "(``ResponseSchema``), the run's servers probed first (one that rejects the JSON-schema format stops the run "
    "with one line); ``false``: never; unset: only where the official code uses a schema, on providers known to "
    "support it.",
    "reading": "how replies are read: ``official``: by the rules of the benchmark's official code; ``strict``: "
    "bedside's stricter reading where it differs (docs/reading-replies.md).",
    "simulator_check": "add the checks of the simulated patient's own errors (facts not in its script, persona "
    "breaks, role reversal, early ends: the ``simulator_check`` scorer, a bedside extension; docs/reports.md); also "
    "on when the LLM checker's role ``simulator_checker`` is bound.",
}
ParseRetries = Annotated[NonNegativeInt, Field(description=SHARED["parse_retries"])]
JudgeRetries = Annotated[NonNegativeInt, Field(description=SHARED["judge_retries"])]
StructuredOutput = Annotated[bool | None, Field(description=SHARED["structured_output"])]
Reading = Annotated[ReadingRule, Field(description=SHARED["reading"])]
SimulatorCheck = Annotated[bool, Field(description=SHARED["simulator_check"])]


# --- the parameter tables ------------------------------------------------------------------------
REPO = Path(__file__).resolve().parent.parent
MARKED = re.compile(
    r"(?P<open><!-- parameters: (?P<task>[\w.-]+) -->\n)(?P<table>.*?)(?P<close><!-- /parameters -->)", re.S
)
HEADER = "| parameter | values | default | meaning |\n|---|---|---|---|\n"


def task_functions() -> dict[str, Callable[..., Any]]:
    """Every registered benchmark's Inspect tasks (in its task modules, ``tasks/<b>*.py``), by task name."""
    return benchmarks.task_functions()


def docstring_args(function: Callable[..., Any]) -> dict[str, str]:
    """The ``Args:`` section of ``function``'s docstring: parameter → its description on one line."""
    parsed = docstring_parser.parse(
        inspect.getdoc(inspect.unwrap(function)) or "", docstring_parser.DocstringStyle.GOOGLE
    )
    return {p.arg_name: " ".join((p.description or "").split()) for p in parsed.params}


def descriptions(function: Callable[..., Any]) -> dict[str, str]:
    """Each parameter of ``function`` → what it means, on one line: its ``Args:`` entry, or for a shared
    parameter its type's description (:data:`SHARED`), then ``Here:`` and its ``Args:`` entry if it has one
    (what is particular to this task). A parameter described by neither is left out."""
    args = docstring_args(function)
    found = {}
    for name, kind in parameter_types(function).items():
        if text := " Here: ".join(t for t in (kind.description, args.get(name, "")) if t):
            found[name] = text
    return found


def documentation_gaps(function: Callable[..., Any]) -> list[str]:
    """What the signature and docstring fail to say about the parameters (empty: every one described)."""
    names, described = list(parameter_types(function)), descriptions(function)
    gaps = [
        f"parameter {n!r} has no description (a shared type's, or the docstring's Args: section)"
        for n in names
        if not described.get(n)
    ]
    gaps += [
        f"the docstring describes {n!r}, which is not a parameter" for n in docstring_args(function) if n not in names
    ]
    return gaps


def _default(parameter: inspect.Parameter) -> str:
    if parameter.default is inspect.Parameter.empty:
        return "*required*"
    if parameter.default is None:
        return "*unset*"
    return f"`{_text(parameter.default)}`"


def _cell(text: str) -> str:
    """Docstring text in a Markdown table cell: ``code`` as `code`, a ``|`` escaped."""
    return re.sub(r"``(.+?)``", r"`\1`", text).replace("|", "\\|")


def markdown_table(task: str) -> str:
    """The parameter table of ``task`` (a header and one row per parameter, in signature order)."""
    functions = task_functions()
    if task not in functions:
        raise KeyError(f"no bedside task named {task!r} (tasks: {', '.join(sorted(functions))})")
    function = functions[task]
    if gaps := documentation_gaps(function):
        raise ValueError(f"task {task}: " + "; ".join(gaps))
    signature = inspect.signature(inspect.unwrap(function))
    meaning = descriptions(function)
    rows = [
        f"| `{name}` | {kind.values()} | {_default(signature.parameters[name])} | {_cell(meaning[name])} |\n"
        for name, kind in parameter_types(function).items()
    ]
    return HEADER + "".join(rows)


def markdown_files(root: Path = REPO) -> list[Path]:
    """The Markdown files of the repository at ``root``: those git tracks and the new ones it does not ignore
    (a page written and not yet added, e.g. a new benchmark's README)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.md"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [root / name for name in sorted(set(listed.split("\0"))) if name and (root / name).is_file()]


def rewrite_markdown(regenerate: Callable[[Path, str], str], paths: Iterable[Path]) -> list[Path]:
    """Rewrite each of the Markdown files ``paths`` whose ``regenerate(path, text)`` differs from its text (the
    generated blocks of the docs: parameter tables, lists of the benchmarks, reply-corpus tables); the files
    that changed."""
    changed = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if (new := regenerate(path, text)) != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def generated_options(parser: argparse.ArgumentParser, what: str, required: bool = True) -> argparse._ActionsContainer:
    """The ``--write`` / ``--check`` options of a command that generates blocks of the docs (``what``: the
    blocks); the group, for a further choice."""
    action = parser.add_mutually_exclusive_group(required=required)
    action.add_argument("--write", action="store_true", help=f"rewrite the {what} in the repository's Markdown")
    action.add_argument("--check", action="store_true", help=f"list the stale {what}, one line each (exit 1)")
    return action


def write_or_check(
    write: bool, rewrite: Callable[[], list[Path]], problems: Callable[[], list[str]], matches: str, root: Path = REPO
) -> int:
    """``--write``: ``rewrite()`` and name each file it changed (below ``root``); else ``--check``: ``problems()``,
    one line each (exit 1), or ``matches`` when there is none."""
    if write:
        for path in rewrite():
            print(f"rewrote {path.relative_to(root).as_posix()}")
        return 0
    found = problems()
    print("\n".join(found) or matches)
    return 1 if found else 0


def marked_tables(root: Path = REPO) -> Iterator[tuple[Path, str, str]]:
    """(file, task, table as written) of every marked table in the repository's Markdown files."""
    for path in markdown_files(root):
        for found in MARKED.finditer(path.read_text(encoding="utf-8")):
            yield path, found["task"], found["table"]


def regenerated(text: str, tables: dict[str, str]) -> str:
    """``text`` with every marked table replaced by the generated one (``tables``: task → table)."""
    return MARKED.sub(lambda m: m["open"] + tables[m["task"]] + m["close"], text)


def problems(root: Path = REPO) -> list[str]:
    """Marked tables that differ from the code (or name no task), and tasks with parameters but no table."""
    functions = task_functions()
    found, seen = [], set()
    for path, task, table in marked_tables(root):
        where = path.relative_to(root).as_posix()
        if task not in functions:
            found.append(f"{where}: a table of {task!r}, which is no bedside task")
            continue
        seen.add(task)
        if table != markdown_table(task):
            found.append(f"{where}: the table of {task} differs from the code (python -m bedside.params --write)")
    found += [
        f"task {task} has parameters but no table in the docs (<!-- parameters: {task} --> ... <!-- /parameters -->)"
        for task, function in functions.items()
        if task not in seen and parameter_types(function)
    ]
    return found


def write(root: Path = REPO) -> list[Path]:
    """Rewrite every marked table of the repository's Markdown files (none, if one names no task); the files
    that changed."""
    tables = {task: markdown_table(task) for task in task_functions()}
    for path in markdown_files(root):  # every file checked before one is written
        if unknown := {m["task"] for m in MARKED.finditer(path.read_text(encoding="utf-8"))} - set(tables):
            raise KeyError(f"{path}: tables of {sorted(unknown)}, which are no bedside tasks")
    return rewrite_markdown(lambda _, text: regenerated(text, tables), markdown_files(root))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bedside.params", description="The task parameter tables of the docs, generated from the code."
    )
    action = generated_options(parser, "parameter tables (--check: and the tasks without one)")
    action.add_argument("--markdown", metavar="TASK", help="print the parameter table of TASK")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown_table(args.markdown), end="")
        return 0
    return write_or_check(args.write, write, problems, "every task's parameter table matches the code")


if __name__ == "__main__":
    sys.exit(main())
