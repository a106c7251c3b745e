"""The README and the channel set-up pages name only what exists: pages, commands, settings, extras, dependencies.

A person follows these lines to the letter; a renamed command, setting or page must fail here, not
on their machine. The checks read the real parser, settings models and pyproject.toml.
"""

from __future__ import annotations

import argparse
import re
import tomllib
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from clawgate.channels.kit import registry
from clawgate.config.schema import ChannelSettings, Settings
from clawgate.gateway.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SETUP_PAGES = [ROOT / "docs" / f"{name}.md" for name in ("telegram", "discord", "slack", "matrix", "email")]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# Variables that are not settings: where the home is.
NOT_SETTINGS = {"CLAWGATE_HOME"}


def code_of(text: str) -> list[str]:
    """The fenced blocks and inline code spans of a Markdown text: where commands and names are written."""
    fences = re.findall(r"^\s*```[^\n]*\n(.*?)^\s*```", text, re.DOTALL | re.MULTILINE)
    prose = re.sub(r"^\s*```[^\n]*\n.*?^\s*```", "", text, flags=re.DOTALL | re.MULTILINE)
    return fences + re.findall(r"`([^`\n]+)`", prose)


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (through `X | None`), or None for a plain value."""
    for kind in (annotation, *typing.get_args(annotation)):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            return kind
    return None


def resolves(path: list[str]) -> bool:
    """Whether a setting path (`["channels", "discord", "owner"]`) names a real setting."""
    model: type[BaseModel] | None = Settings
    for depth, part in enumerate(path):
        if model is None:
            return False
        if model is ChannelSettings and part not in model.model_fields:
            if part not in registry.installed():
                return False
            model = registry.load(part).settings_model
            continue
        field = model.model_fields.get(part)
        if field is None:
            return False
        model = model_of(field.annotation)
        if model is None and depth < len(path) - 1:
            return False
    return True


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def word_choices(parser: argparse.ArgumentParser) -> set[str]:
    """What may follow a command as its first word: sub-commands, or a positional's fixed choices."""
    found = set(subcommands(parser))
    for action in parser._actions:
        if not action.option_strings and action.choices and not isinstance(action, argparse._SubParsersAction):
            found |= set(action.choices)
    return found


def test_every_linked_page_exists() -> None:
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"\]\(([^)#\s]+)", text)) | set(re.findall(r"\bdocs/[\w-]+\.md\b", text))
    local = sorted(n for n in named if not n.startswith(("http://", "https://")))
    assert "docs/performance.md" in local and "docs/slack.md" in local
    missing = [n for n in local if not (ROOT / n).exists()]
    assert not missing, f"README links pages that do not exist: {missing}"


def test_every_channel_has_its_setup_page_linked() -> None:
    text = README.read_text(encoding="utf-8")
    for page in SETUP_PAGES:
        assert f"](docs/{page.name})" in text, f"README does not link {page.name}"
        assert "## Setup" in page.read_text(encoding="utf-8"), f"{page.name} has no Setup section"


def test_every_command_named_exists() -> None:
    parser = build_parser()
    commands = subcommands(parser)
    seen: list[str] = []
    for code in code_of(README.read_text(encoding="utf-8")):
        code = re.sub(r"(^|\s)/clawgate\b", " ", code)  # Slack's slash command, not the CLI
        for command, word in re.findall(r"\bclawgate ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", code):
            seen.append(command)
            assert command in commands, f"README names `clawgate {command}`, which the CLI does not have"
            choices = word_choices(commands[command])
            if word and choices:
                assert word in choices, f"README names `clawgate {command} {word}`; the CLI has {sorted(choices)}"
    assert {"init", "gateway", "chat", "doctor", "channels", "cron", "pairing"} <= set(seen)


@pytest.mark.parametrize("page", [README, *SETUP_PAGES], ids=lambda p: p.name)
def test_every_environment_variable_is_a_setting(page: Path) -> None:
    names = set(re.findall(r"\bCLAWGATE_[A-Z0-9_]+", page.read_text(encoding="utf-8")))
    checked = 0
    for name in sorted(names - NOT_SETTINGS):
        path = name.removeprefix("CLAWGATE_").lower().split("__")
        if not all(path):  # a pattern such as CLAWGATE_CHANNELS__<NAME>__TOKEN
            continue
        checked += 1
        assert resolves(path), f"{page.name} names {name}, which is no setting"
    assert checked, f"{page.name} names no setting as an environment variable"


def test_every_dotted_setting_exists() -> None:
    sections = set(Settings.model_fields)
    found = []
    for code in code_of(README.read_text(encoding="utf-8")):
        match = re.match(r"^([a-z_]+(?:\.[a-z_]+)+)(?:\s|,|$)", code)
        if match and match.group(1).split(".")[0] in sections:
            found.append(match.group(1))
            assert resolves(match.group(1).split(".")), f"README names `{match.group(1)}`, which is no setting"
    assert len(found) >= 10


def test_every_extra_named_exists() -> None:
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    for page in [README, *SETUP_PAGES]:
        for group in re.findall(r"clawgate\[([a-z,]+)\]", page.read_text(encoding="utf-8")):
            for extra in group.split(","):
                assert extra in extras, f"{page.name} installs clawgate[{extra}], which pyproject.toml lacks"


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_dependency_table_matches_pyproject() -> None:
    """Every package the daemon or a channel installs has its row in README's table, and no row is stale."""
    project = PYPROJECT["project"]
    requirements = list(project["dependencies"])
    for extra, listed in project["optional-dependencies"].items():
        if extra != "test":
            requirements += listed
    wanted = {normalized(re.match(r"[A-Za-z0-9_.-]+", r).group(0)) for r in requirements}  # type: ignore[union-attr]
    wanted.discard("clawgate")  # an extra made of other extras (clawgate[email]) adds no package of its own
    text = README.read_text(encoding="utf-8")
    table = text.split("## Dependencies", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| package")]
    named = {normalized(re.match(r"\| ([A-Za-z0-9_.-]+)", row).group(1)) for row in rows}  # type: ignore[union-attr]
    assert wanted - named == set(), f"packages without a row in README's Dependencies table: {wanted - named}"
    assert named - wanted == set(), f"rows for packages pyproject.toml does not install: {named - wanted}"
