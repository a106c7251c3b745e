"""The architecture as a test: imports go only downward, gateway > channels > agent > workspace > config.

import-linter reads every import statement (TYPE_CHECKING blocks and function-level imports
included) and checks the layers contract in pyproject.toml.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_imports_only_go_down_the_layers() -> None:
    result = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                             "sys.exit(lint_imports_command())", "--no-cache"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    """The same contract on a copy where agent imports gateway (only for type checking) must fail."""
    for package in ("gateway", "channels", "agent", "workspace", "config"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "agent" / "loop.py").write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from gateway.app import App
    """))
    (tmp_path / "gateway" / "app.py").write_text("import agent.loop\n")
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    result = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from importlinter.cli import "
         "lint_imports_command; sys.argv[1:] = ['--no-cache']; sys.exit(lint_imports_command())", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "agent.loop -> gateway.app" in result.stdout
