"""exec under the sandbox runs programs reached through a version manager's shims in the home folder
(pyenv's layout: shims/ -> libexec/ -> versions/<v>/bin; nvm's: a version's bin/ symlinking into lib/),
and says why and how to allow it when a program lies in a home folder the sandbox does not grant. A fake
manager in a temp HOME, the real Landlock launcher; the rest of the home stays unreadable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawgate.agent.tools.base import ToolError
from clawgate.agent.tools.sandbox import SandboxPolicy, sandbox_status, version_manager_roots
from clawgate.agent.tools.shell import Exec
from clawgate.config.schema import ExecSettings
from tests.harness import REAL_PYTHON_PATH
from tests.unit.agent.tools.test_attacks_exec import Box, needs_sandbox, sandbox_required  # noqa: F401 (the fixture)


pytestmark = needs_sandbox
PRIVATE = "private-note-9c4e1a"


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp HOME with a pyenv-like manager, an nvm-like one, a stray tool, and a private file."""
    home = tmp_path / "home"
    pyenv = home / ".pyenv"
    (pyenv / "version").parent.mkdir(parents=True)
    (pyenv / "version").write_text("1.2.3\n")
    script(pyenv / "versions/1.2.3/bin/snake", f'echo "snake $(cat {pyenv}/version) says: $*"\n')
    # like pyenv: the shim hard-codes the root and execs the manager, which picks the version and execs it
    script(pyenv / "libexec/pyenv", f'program=$2; shift 2; exec "{pyenv}/versions/$(cat {pyenv}/version)/bin/$program" "$@"\n')
    script(pyenv / "shims/snake", f'PYENV_ROOT="{pyenv}"; exec "{pyenv}/libexec/pyenv" exec snake "$@"\n')
    node = home / ".nvm/versions/node/v9.0.0"
    script(node / "lib/node_modules/npm/bin/npm-cli", 'echo "npm ran"\n')
    (node / "bin").mkdir(parents=True)
    (node / "bin/npm").symlink_to("../lib/node_modules/npm/bin/npm-cli")
    script(home / "stuff/real-tool", 'echo "stray tool ran"\n')
    (home / "bin").mkdir()
    (home / "bin/stray").symlink_to(home / "stuff/real-tool")
    (home / "secret.txt").write_text(PRIVATE)
    path = os.pathsep.join([str(pyenv / "shims"), str(node / "bin"), str(home / "bin"), REAL_PYTHON_PATH])
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", path)
    return home


def tool(box: Box, **settings: object) -> Exec:
    exec_settings = ExecSettings(allowlist=["snake", "npm", "stray", "cat"], **settings)  # type: ignore[arg-type]
    return Exec(exec_settings, sandbox=SandboxPolicy.for_paths(box.paths, exec_settings.sandbox_read_paths))


async def run(box: Box, argv: list[str], **settings: object) -> str:
    return await tool(box, **settings).run(Exec.Arguments(argv=argv), box.ctx)


async def test_a_pyenv_style_shim_and_an_nvm_style_bin_run(home: Path, tmp_path: Path) -> None:
    box = Box(tmp_path)
    roots = version_manager_roots(os.environ["PATH"])  # (the machine's own PATH follows: it may have more)
    assert roots.items() >= {str(home / ".pyenv"): "pyenv", str(home / ".nvm"): "nvm"}.items(), roots
    assert (await run(box, ["snake", "hiss"])).startswith("exit code 0\n")
    assert "snake 1.2.3 says: hiss" in await run(box, ["snake", "hiss"])
    assert "npm ran" in await run(box, ["npm"])
    # the home folder itself is still not granted: only the managers' roots are
    refused = await run(box, ["cat", str(home / "secret.txt")])
    assert PRIVATE not in refused and "Permission denied" in refused, refused


async def test_a_program_elsewhere_in_the_home_says_why_and_how_to_allow_it(home: Path, tmp_path: Path) -> None:
    box = Box(tmp_path)
    with pytest.raises(ToolError) as refused:
        await run(box, ["stray"])
    text = refused.value.render()
    assert str(home / "stuff/real-tool") in text and "tools.exec.sandbox_read_paths" in text, text
    assert str(home / "stuff") in text
    assert "stray tool ran" in await run(box, ["stray"], sandbox_read_paths=[str(home / "stuff")])


async def test_a_shim_whose_interpreter_is_refused_gets_a_note_naming_the_setting(home: Path, tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A manager the sandbox does not know: its shim starts (its folder is on PATH), its interpreter is refused."""
    other = home / "tools/odd"
    script(other / "core/runner", 'echo "runner ran"\n')
    script(other / "shims/oddity", f'exec "{other}/core/runner" "$@"\n')
    monkeypatch.setenv("PATH", os.pathsep.join([str(other / "shims"), REAL_PYTHON_PATH]))
    box = Box(tmp_path)
    out = await tool(box).run(Exec.Arguments(argv=["sh", "-c", "oddity"]), box.ctx)
    assert "runner ran" not in out and "Permission denied" in out, out
    assert f"does not grant {other / 'core/runner'}" in out and "tools.exec.sandbox_read_paths" in out, out
    assert f"adding {other / 'core'}" in out
