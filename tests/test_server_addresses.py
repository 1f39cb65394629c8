"""docs/serving.md, "Pointing a role at a server": what works and what fails, with the message Inspect
(0.3.285) prints, each checked against loopback servers through Inspect's own command line (run in
this process; the working forms also run as documented commands, tests/test_documented_commands.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bedside.compat import PrerequisiteError
from tests import forked
from tests.compat import forget_models, inspect_cli
from tests.loopback.server import LoopbackServer

pytestmark = pytest.mark.eval  # Inspect's command line, run in this process, starts evals


@pytest.fixture
def data(tmp_path):
    from tests.cpb.synthetic import write_data

    return str(write_data(tmp_path / "cpb"))


@pytest.fixture
def server(monkeypatch):
    with LoopbackServer() as running:
        monkeypatch.setenv("BEDSIDE_LOOPBACK_URL", running.base_url)
        yield running


def inspect(*args: str, log_dir: Path) -> None:
    """``inspect <args>`` in this process, as a new process would run it (no memoized model)."""
    forget_models()
    inspect_cli().main(
        args=[*args, "--display", "none", "--log-dir", str(log_dir)], prog_name="inspect", standalone_mode=False
    )


def cpb(data: str, *args: str) -> list[str]:
    return ["eval", "bedside/cpb", "-T", f"data={data}", "--limit", "1", *args]


def models_at(server: LoopbackServer) -> set[str]:
    return {model for model, _ in server.routes}


def test_the_role_mapping_takes_the_address_in_model_args(server, data, tmp_path, monkeypatch):
    monkeypatch.setenv("QWEN_API_KEY", "none")
    mapping = f"grader={{model: openai-api/qwen/Qwen3.5-9B, model_args: {{base_url: {server.base_url}}}}}"
    inspect(*cpb(data, "--model", "bedside/scripted", "--model-role", mapping), log_dir=tmp_path)
    assert models_at(server) == {"Qwen3.5-9B"}


def test_a_base_url_at_the_top_of_a_role_mapping_fails_before_any_task_is_loaded(tmp_path):
    """In a process of its own (a fork of the warm server, which has not imported bedside): Inspect refuses
    it while parsing the command line, before it imports bedside (so bedside cannot say it in its own words)."""
    code = (
        "import sys\n"
        "from inspect_ai._cli.main import inspect\n"
        "try:\n"
        "    inspect.main(args=sys.argv[1:], prog_name='inspect', standalone_mode=False)\n"
        "except ValueError as error:\n"
        "    print(error)\n"
        "print('bedside imported:', 'bedside' in sys.modules)\n"
    )
    mapping = "monitor={model: openai-api/qwen/Qwen3.5-9B, base_url: http://gpu-host:8002/v1}"
    args = [
        "eval",
        "bedside/discharge",
        "--model",
        "bedside/scripted",
        "--model-role",
        mapping,
        "--log-dir",
        str(tmp_path),
    ]
    (tmp_path / "parse_only.py").write_text(code)
    done = forked.run([sys.executable, "-m", "parse_only", *args], cwd=tmp_path, timeout=300)
    lines = done.stdout.splitlines()
    assert lines[0] == "Invalid config for model role 'monitor': 1 validation error for GenerateConfig", done.stdout
    assert lines[1].startswith(
        "  Value error, Unknown GenerateConfig field(s): base_url. Use extra_body for provider-specific options."
    )
    assert lines[-1] == "bedside imported: False"


def test_service_variables_point_every_model_of_the_service(server, data, tmp_path, monkeypatch):
    monkeypatch.setenv("QWEN_BASE_URL", server.base_url)
    monkeypatch.setenv("QWEN_API_KEY", "none")
    args = cpb(data, "--model", "openai-api/qwen/doctor", "--model-role", "grader=openai-api/qwen/judge")
    inspect(*args, log_dir=tmp_path)
    assert models_at(server) == {"doctor", "judge"}


@pytest.mark.parametrize(
    ("unset", "message"),
    [
        ("QWEN_BASE_URL", "No QWEN_BASE_URL defined in the environment."),
        ("QWEN_API_KEY", "No QWEN_API_KEY defined in the environment."),
    ],
)
def test_a_service_without_its_variables_is_refused(unset, message, data, tmp_path, monkeypatch):
    monkeypatch.setenv("QWEN_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("QWEN_API_KEY", "none")
    monkeypatch.delenv(unset)
    with pytest.raises(PrerequisiteError) as raised:
        inspect(*cpb(data, "--model", "openai-api/qwen/doctor"), log_dir=tmp_path)
    assert message in raised.value.message.replace("[bold][blue]", "").replace("[/blue][/bold]", "")


def test_the_model_under_test_takes_model_base_url_not_m_base_url(server, data, tmp_path, monkeypatch):
    monkeypatch.setenv("QWEN_API_KEY", "none")
    base = cpb(data, "--model", "openai-api/qwen/doctor", "--model-role", "grader=bedside/scripted")
    inspect(*base, "--model-base-url", server.base_url, log_dir=tmp_path)
    assert models_at(server) == {"doctor"}
    with pytest.raises(TypeError, match=r"get_model\(\) got multiple values for keyword argument 'base_url'"):
        inspect(*base, "-M", f"base_url={server.base_url}", log_dir=tmp_path)


def test_a_model_spec_takes_base_url_at_the_top_not_in_model_args(server, data, tmp_path, monkeypatch):
    monkeypatch.setenv("QWEN_API_KEY", "none")
    top = f"{{model: openai-api/qwen/doctor, base_url: {server.base_url}}}"
    inspect(*cpb(data, "--model-spec", top, "--model-role", "grader=bedside/scripted"), log_dir=tmp_path)
    assert models_at(server) == {"doctor"}
    nested = f"{{model: openai-api/qwen/doctor, model_args: {{base_url: {server.base_url}}}}}"
    with pytest.raises(TypeError, match="got multiple values for keyword argument 'base_url'"):
        inspect(*cpb(data, "--model-spec", nested, "--model-role", "grader=bedside/scripted"), log_dir=tmp_path)


def test_m_port_points_a_vllm_model_under_test_at_localhost(data, tmp_path, monkeypatch):
    import socket

    with socket.socket() as probe:  # a free port for a server that listens on localhost
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with LoopbackServer(port=port) as server:
        monkeypatch.delenv("VLLM_BASE_URL", raising=False)
        args = cpb(
            data, "--model", "vllm/Qwen/Qwen3.5-9B", "-M", f"port={port}", "--model-role", "grader=bedside/scripted"
        )
        inspect(*args, log_dir=tmp_path)
        assert models_at(server) == {"Qwen/Qwen3.5-9B"}


def test_bedside_commands_take_m_base_url(server, data, tmp_path, monkeypatch):
    from bedside.cli import main as bedside

    monkeypatch.setenv("QWEN_API_KEY", "none")
    inspect(*cpb(data, "--model", "bedside/scripted", "--model-role", "grader=bedside/scripted"), log_dir=tmp_path)
    [log] = tmp_path.glob("*.eval")
    forget_models()
    rescored = ["rescore", str(log), "--grader", "openai-api/qwen/judge", "-M", f"base_url={server.base_url}"]
    assert bedside([*rescored, "--out", str(tmp_path / "rescored")]) == 0
    assert models_at(server) == {"judge"}


def test_build_cases_takes_m_base_url_as_the_models_address(tmp_path, capsys, monkeypatch):
    from bedside.cli import main as bedside

    monkeypatch.setenv("QWEN_API_KEY", "none")
    args = ["build-cases", "--mimic", "m", "--note", "n", "--out", str(tmp_path / "cases.jsonl")]
    model = ["--model", "openai-api/qwen/Qwen3-32B"]
    # a non-local address: refused by the data-use guard, naming the address it was given
    assert bedside([*args, *model, "-M", "base_url=http://gpu-host:8000/v1"]) == 3
    assert "base URL http://gpu-host:8000/v1" in capsys.readouterr().err
    both = ["-M", "base_url=http://gpu-host:8000/v1", "--model-base-url", "http://gpu-host:8000/v1"]
    assert bedside([*args, *model, *both]) == 2
    assert "give the model's base URL once" in capsys.readouterr().err


def test_inspect_itself_ignores_a_role_name_no_solver_asks_for(tmp_path):
    """Why bedside's tasks check the names: a plain Inspect task runs with a role it never uses."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import get_model
    from inspect_ai.solver import generate

    task = Task(dataset=[Sample(input="hello")], solver=generate())
    scripted = get_model("bedside/scripted", memoize=False)
    [log] = eval(task, model=scripted, model_roles={"judge": scripted}, log_dir=str(tmp_path), display="none")
    assert log.status == "success" and set(log.eval.model_roles or {}) == {"judge"}
