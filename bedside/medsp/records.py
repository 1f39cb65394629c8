"""MedSP1000 records and loaders (paper arXiv 2606.05112, Sections 2.1.1, 4 and 5.4).

A MedSP1000 *scenario* is one independently runnable SP encounter of a source case. Its material
is split into four role packets (paper Section 4, "Role-specific packets"), one folder each::

    <root>/<case_id>/<scenarioN>/examinee/                scenario initialisation (the model under test)
    <root>/<case_id>/<scenarioN>/sp_actor/                the standardized-patient script
    <root>/<case_id>/<scenarioN>/environment_controller/  environment materials (results, timed events, team)
    <root>/<case_id>/<scenarioN>/evaluator/               scoring references (never shown to the other agents)

Each folder holds text files, read recursively in path order, as the official loader does
(MAGIC-AI4Med/MedSP1000 ``case_loader.py``): suffixes ``.md``, ``.markdown``, ``.txt``, ``.json``,
``.yaml``/``.yml``, ``.csv``, ``.html``, ``.xml`` or none; paths with a component starting with ``.``
are ignored; other files are listed as skipped. Role folders may also carry the official loader's
alternative names (``SP``/``sp`` for ``sp_actor``, ``environment`` for ``environment_controller``,
and the Chinese names). A packet is shown to its agent as the official code compiles it
(:meth:`RolePacket.text`): each file under a ``## <file name>`` header, struck-through Markdown
(``~~text~~``, also across lines) removed, runs of blank lines collapsed and lines holding only a
heading, bullet or number marker dropped (:func:`normalise_packet_text`). The frozen rubric of a scenario is
``<case_id>_<scenarioN>.json`` with the keys ``case_id``, ``scenario``, ``rubric_version`` and
the six ACGME arrays ``PC``, ``MK``, ``SBP``, ``ICS``, ``PBLI``, ``PROF`` of verbatim item
strings (paper 5.4; the official release also carries the authors' ``scenario_dir``). It is
looked up in a separate folder when one is given (``rubrics=``, as in the official release),
otherwise next to the scenario: in the scenario folder, the case folder, then the root.

Optional case metadata (e.g. the HealthBench specialty the paper assigns to every case) is read
from ``<root>/<case_id>/metadata.json`` (or ``.yaml``/``.yml``) and may be refined per scenario
by ``<root>/<case_id>/<scenarioN>/metadata.json``.

Loader contract. Bad input never crashes the loader and is never dropped silently: every file or
scenario that cannot be used is returned as an :class:`Unusable` entry naming the file, the
record (``case_id/scenario``) and the field, with the reason (an empty rubric file, invalid JSON,
a missing role folder, an empty packet file, a rubric whose ids do not match its file name, a folder
that does not follow the ``<root>/<case_id>/<scenarioN>/<role>/`` layout, ...).
Callers report them (the task logs a warning and writes them into the eval log). A rubric with
zero items is valid (the release has 86) but cannot be scored; :func:`load_rubrics` lists them.

Bad data, reported as :class:`Unusable` (the scenario is left out, the others run): empty files
(rubric, packet or metadata), truncated or invalid JSON/YAML (line and column), bytes that are not
UTF-8 (line and byte offset), rubrics with missing or mistyped fields, empty or repeated items, or
ids that disagree with the file name, metadata that is not a mapping or has mistyped fields. Nothing
usable at all (or no such folder) raises :class:`MedSPError`, a ``PrerequisiteError``: ``inspect
eval`` prints it without a Python traceback. Legitimately odd data, accepted: rubrics without any
item (listed, not scored), files of any length (a 1 MB packet file is passed to its agent as is; a
model whose context it overflows ends the encounter with ``error``), non-text files in a role folder
(listed as skipped), case ids that are any folder name (unique by construction).
"""

from bedside.medsp.rubric import (
    COMPETENCIES,
    COMPETENCY_NAMES,
    RUBRIC_FILE,
    MedSPError,
    Rubric,
    RubricItem,
    RubricSet,
    SubsetFile,
    Unusable,
    load_rubrics,
    load_subset,
    read_rubric,
)
from bedside.medsp.scenario import (
    LAYOUT,
    METADATA_NAMES,
    ROLE_ALIASES,
    ROLES,
    SCENARIO_DIR,
    TEXT_SUFFIXES,
    CaseMeta,
    PacketFile,
    RolePacket,
    Scenario,
    ScenarioSet,
    layout_problems,
    load_scenarios,
    normalise_packet_text,
    read_packet,
    role_folder,
    scenario_dirs,
)
from bedside.medsp.store import INITIAL_STATE, INITIAL_STATUS, MedSPStore, SimState, TurnRecord

__all__ = [
    "COMPETENCIES",
    "COMPETENCY_NAMES",
    "RUBRIC_FILE",
    "MedSPError",
    "Rubric",
    "RubricItem",
    "RubricSet",
    "SubsetFile",
    "Unusable",
    "load_rubrics",
    "load_subset",
    "read_rubric",
    "LAYOUT",
    "METADATA_NAMES",
    "ROLE_ALIASES",
    "ROLES",
    "SCENARIO_DIR",
    "TEXT_SUFFIXES",
    "CaseMeta",
    "PacketFile",
    "RolePacket",
    "Scenario",
    "ScenarioSet",
    "layout_problems",
    "load_scenarios",
    "normalise_packet_text",
    "read_packet",
    "role_folder",
    "scenario_dirs",
    "INITIAL_STATE",
    "INITIAL_STATUS",
    "MedSPStore",
    "SimState",
    "TurnRecord",
]
