"""`make run` installs what the daemon runs (its channels' libraries), never the test extra (pytest,
Synapse, Playwright: hundreds of MB a user does not need); `make test` installs the test extra too.
Read from what make would run (`make -n`) and pyproject.toml's extras, followed through
`clawgate[...]` self-references."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CHANNELS = {"discord", "matrix", "slack", "email", "signal", "googlechat", "dingtalk", "teams", "feishu", "whatsapp-linked"}


def installed_extras(target: str) -> set[str]:
    """The extras of the editable install `make <target>` would run on a fresh machine."""
    if shutil.which("make") is None:
        pytest.fail("make is not installed: apt-get install make", pytrace=False)
    stamp = {"run": ".venv/.installed-run", "test": ".venv/.installed-test"}[target]
    plan = subprocess.run(["make", "-n", "-B", stamp], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    installs = re.findall(r"pip install .*-e '\.\[([^\]]*)\]'", plan)
    assert len(installs) == 1, plan
    return {extra.strip() for extra in installs[0].split(",")}


def requirements(extras: set[str]) -> set[str]:
    """The distribution names clawgate with these extras pulls in (its own extras followed)."""
    names, seen, todo = set(), set(), list(extras)
    for requirement in PROJECT["dependencies"]:
        names.add(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower())
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in PROJECT["optional-dependencies"][extra]:
            name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()
            if name == "clawgate":
                todo += re.search(r"\[([^\]]*)\]", requirement).group(1).split(",")
            else:
                names.add(name)
    return names


def test_make_run_installs_the_daemon_and_its_channels_not_the_test_extra() -> None:
    extras = installed_extras("run")
    assert extras == CHANNELS
    pulled = requirements(extras)
    assert {"discord.py", "matrix-nio", "slack_sdk", "imapclient"} <= pulled
    test_only = {"pytest", "pytest-asyncio", "playwright", "matrix-synapse", "aiosmtpd", "import-linter"}
    assert not pulled & test_only, pulled & test_only


def test_make_test_installs_the_test_extra_and_everything_make_run_does() -> None:
    extras = installed_extras("test")
    assert "test" in extras and CHANNELS <= extras
    assert {"pytest", "playwright", "matrix-synapse"} <= requirements(extras)
