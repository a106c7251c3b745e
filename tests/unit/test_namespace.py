"""One import namespace: every import of clawgate's code says `clawgate.…`, and the wheel lists
every package (pyproject [tool.setuptools] packages).

Why: tests run from the repository root, where `agent`, `config`… are also folders; a bare
`import agent.loop` would load a second copy of a module beside `clawgate.agent.loop` (two
registries, two locks) instead of failing.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "channels", "agent", "workspace", "config")


def bare_imports(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        found += [f"{path.relative_to(root)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in PACKAGES]
    return found


def sources(folder: str, pattern: str = "*.py") -> list[Path]:
    """The project's own files under `folder`: not inside hidden folders such as a bench's private
    virtualenv (bench/.venv-nanobot holds third-party code)."""
    return [p for p in (ROOT / folder).rglob(pattern)
            if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]


def test_no_module_imports_a_bare_top_level_name() -> None:
    files = [p for folder in (*PACKAGES, "tests", "bench") for p in sources(folder)]
    assert len(files) > 100
    offenders = [hit for path in files for hit in bare_imports(path)]
    assert offenders == [], "import these as clawgate.<package>…:\n" + "\n".join(offenders)


def test_the_check_sees_a_bare_import(tmp_path: Path) -> None:
    # written outside the tree: a parallel worker scanning tests/ at that moment must not see it
    sample = tmp_path / "tests" / "unit" / "_bare_sample.py"
    sample.parent.mkdir(parents=True)
    sample.write_text("from agent.loop import AgentLoop\nimport clawgate.config\n")
    assert bare_imports(sample, tmp_path) == ["tests/unit/_bare_sample.py:1: agent.loop"]


def importable_folders(folder: str) -> set[str]:
    """Folders holding files whose path Python could import (every part an identifier): code packages
    and data folders alike, which setuptools ships (and builds without warnings) only when listed."""
    found = set()
    for path in sources(folder, "*"):
        parts = path.parent.relative_to(ROOT).parts
        if not path.is_file() or "__pycache__" in parts:
            continue
        for depth in range(1, len(parts) + 1):  # skills/ of skills/long-task/SKILL.md too
            if not all(part.isidentifier() for part in parts[:depth]):
                break
            found.add("clawgate." + ".".join(parts[:depth]))
    return found


def test_every_package_is_in_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {name for folder in PACKAGES for name in importable_folders(folder)}
    assert "clawgate.gateway.web.static" in on_disk and "clawgate.agent.fleet" in on_disk
    assert listed == on_disk, f"add to pyproject packages: {sorted(on_disk - listed)}; " \
                              f"remove: {sorted(listed - on_disk)}"
