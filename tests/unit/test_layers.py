"""The architecture as a test: imports go only downward, gateway > channels > agent > workspace > config,
and inside the agent the face > subsystems > tools > infrastructure (pyproject.toml [tool.importlinter]).

import-linter reads every import statement (TYPE_CHECKING blocks and function-level imports
included). It walks folders, and an editable install maps clawgate.* with an import hook, so the
contracts run on a `clawgate/` folder of links to the repository's packages.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "channels", "agent", "workspace", "config")
LINT = ("import sys; sys.path.insert(0, sys.argv[1]); from importlinter.cli import lint_imports_command; "
        "sys.argv[1:] = ['--no-cache']; sys.exit(lint_imports_command())")


def linted(tree: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LINT, str(tree)], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_imports_only_go_down_the_layers(tmp_path: Path) -> None:
    (tmp_path / "clawgate").mkdir()
    (tmp_path / "clawgate" / "__init__.py").write_text("")
    for package in PACKAGES:
        (tmp_path / "clawgate" / package).symlink_to(ROOT / package)
    result = linted(tmp_path, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    """The same contracts on a copy where agent imports gateway (only for type checking) must fail."""
    for package in PACKAGES:
        (tmp_path / "clawgate" / package).mkdir(parents=True)
        (tmp_path / "clawgate" / package / "__init__.py").write_text("")
    (tmp_path / "clawgate" / "__init__.py").write_text("")
    (tmp_path / "clawgate" / "agent" / "loop.py").write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from clawgate.gateway.app import App
    """))
    (tmp_path / "clawgate" / "gateway" / "app.py").write_text("import clawgate.agent.loop\n")
    config = (ROOT / "pyproject.toml").read_text()
    # only the first contract applies to this small tree (the agent's sub-packages are not in it)
    (tmp_path / "pyproject.toml").write_text(config.split("\n# Inside the agent:")[0] + "\n")
    result = linted(tmp_path, tmp_path)
    assert result.returncode != 0
    assert "clawgate.agent.loop -> clawgate.gateway.app" in result.stdout


@pytest.mark.parametrize(("module", "line", "edge"), [
    ("core/errors.py", "from clawgate.agent.loop import AgentLoop", "clawgate.agent.core.errors -> clawgate.agent.loop"),
    # the two knots that were once allowed: exec's background jobs, the session's marker neutralising
    ("tools/shell.py", "from clawgate.agent.jobs.background import BackgroundJobs",
     "clawgate.agent.tools.shell -> clawgate.agent.jobs.background"),
    ("session.py", "from clawgate.agent.context.builder import ContextBuilder",
     "clawgate.agent.session -> clawgate.agent.context.builder"),
])
def test_the_agent_contract_catches_an_upward_import(tmp_path: Path, module: str, line: str, edge: str) -> None:
    """The agent's inner layers: a lower part importing a higher one must fail."""
    (tmp_path / "clawgate").mkdir()
    (tmp_path / "clawgate" / "__init__.py").write_text("")
    for package in PACKAGES:
        if package != "agent":
            (tmp_path / "clawgate" / package).symlink_to(ROOT / package)
    agent = tmp_path / "clawgate" / "agent"
    subprocess.run(["cp", "-r", str(ROOT / "agent"), str(agent)], check=True)
    with (agent / module).open("a") as f:
        f.write(f"\n{line}  # noqa: E402\n")
    result = linted(tmp_path, ROOT)
    assert result.returncode != 0
    assert edge in result.stdout


def test_every_agent_part_has_a_layer() -> None:
    """A new sub-package or module of the agent must be placed in the agent contract, not left outside it."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (agent,) = [c for c in contracts if c.get("containers") == ["clawgate.agent"]]
    named = {part.strip() for layer in agent["layers"] for part in re.split(r"[|:]", layer)}
    parts = {p.stem for p in (ROOT / "agent").glob("*.py") if p.stem != "__init__"}
    parts |= {p.parent.name for p in (ROOT / "agent").glob("*/__init__.py")}
    assert parts - named == set(), f"agent parts with no layer in pyproject.toml: {sorted(parts - named)}"
    assert named - parts == set(), f"layers naming no agent part: {sorted(named - parts)}"
    assert all(":" not in layer for layer in agent["layers"]), "a `:` layer lets its members import each other"


def test_the_channels_contract_catches_a_channel_importing_the_command_module(tmp_path: Path) -> None:
    """Channels get commands and session keys from the kit's ChannelServices, never from agent internals."""
    (tmp_path / "clawgate").mkdir()
    (tmp_path / "clawgate" / "__init__.py").write_text("")
    for package in PACKAGES:
        if package != "channels":
            (tmp_path / "clawgate" / package).symlink_to(ROOT / package)
    channels = tmp_path / "clawgate" / "channels"
    subprocess.run(["cp", "-r", str(ROOT / "channels"), str(channels)], check=True)
    with (channels / "kit" / "commands.py").open("a") as f:
        f.write("\nfrom clawgate.agent.commands import NAMES  # noqa: E402\n")
    result = linted(tmp_path, ROOT)
    assert result.returncode != 0
    assert "clawgate.channels.kit.commands -> clawgate.agent.commands" in result.stdout


def test_the_adapters_contract_catches_an_adapter_importing_the_kit_itself(tmp_path: Path) -> None:
    """An adapter types its kit as AdapterKit (the kit's contract), never the ChannelKit class or the kit's parts."""
    (tmp_path / "clawgate").mkdir()
    (tmp_path / "clawgate" / "__init__.py").write_text("")
    for package in PACKAGES:
        if package != "channels":
            (tmp_path / "clawgate" / package).symlink_to(ROOT / package)
    channels = tmp_path / "clawgate" / "channels"
    subprocess.run(["cp", "-r", str(ROOT / "channels"), str(channels)], check=True)
    with (channels / "slack" / "adapter.py").open("a") as f:
        f.write("\nfrom clawgate.channels.kit.kit import ChannelKit  # noqa: E402\n")
    result = linted(tmp_path, ROOT)
    assert result.returncode != 0
    assert "clawgate.channels.slack.adapter -> clawgate.channels.kit.kit" in result.stdout
