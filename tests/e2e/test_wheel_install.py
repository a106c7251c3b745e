"""The wheel, installed into a fresh venv next to a distribution that ships a top-level `config`:
`clawgate --version` and a chat through the fake Messages API work from the installed console script.

Why: clawgate's packages install as clawgate.* (pyproject package-dir), so another distribution's
generic top-level names cannot shadow them. The fresh venv sees this environment's dependencies through
a .pth line (no download, well under the time a `pip install` from PyPI would take); clawgate itself
and the dummy come only from their wheels.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
import zipfile
from pathlib import Path

from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.harness import ROOT, DaemonProcess


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def build_wheel(source: Path, out: Path) -> Path:
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", out, source, cwd=out)
    return next(out.glob("*.whl"))


# What setuptools says when the configuration leaves something to guess (a data folder that is not a
# listed package, a pattern that matches nothing): each a file that may be left out in a later release.
SETUPTOOLS_WARNINGS = re.compile(r"SetuptoolsDeprecationWarning|SetuptoolsWarning|would be ignored|^\s*warning: ", re.M)
DATA_FOLDERS = ("gateway/web/static", "workspace/templates")  # the web page's files; what `init` writes


def test_the_wheel_ships_every_static_file_and_template_and_builds_without_warnings(tmp_path: Path) -> None:
    # the build's own output (pip shows the backend's when not --quiet)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp_path, ROOT], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    warnings = [line for line in (built.stdout + built.stderr).splitlines() if SETUPTOOLS_WARNINGS.search(line)]
    assert not warnings, "\n".join(warnings)
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", *DATA_FOLDERS], capture_output=True, text=True,
                            check=True).stdout.split()
    assert any(name.endswith("index.html") for name in listed) and any(name.endswith("SKILL.md") for name in listed)
    with zipfile.ZipFile(next(tmp_path.glob("*.whl"))) as wheel:
        shipped = set(wheel.namelist())
    missing = [name for name in listed if f"clawgate/{name}" not in shipped]
    assert not missing, f"not in the wheel: {missing}"


def dummy_config_dist(tmp_path: Path) -> Path:
    """A distribution with a top-level `config` package, as any other project may ship."""
    src = tmp_path / "dummy"
    (src / "config").mkdir(parents=True)
    (src / "config" / "__init__.py").write_text('WHO = "dummy"\n')
    (src / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=77"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "dummy-config"
        version = "1.0"
        [tool.setuptools]
        packages = ["config"]
    """))
    return build_wheel(src, tmp_path / "dummy-wheel")


def fresh_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    site = Path(run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                    cwd=tmp_path).strip())
    # the dependencies (not clawgate: a plain path line runs no editable-install hook)
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def test_wheel_installs_beside_a_top_level_config_and_chats(tmp_path: Path) -> None:
    (tmp_path / "wheel").mkdir()
    (tmp_path / "dummy-wheel").mkdir()
    wheel = build_wheel(ROOT, tmp_path / "wheel")
    dummy = dummy_config_dist(tmp_path)
    venv = fresh_venv(tmp_path)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet", "--no-deps",
        "--ignore-installed", wheel, dummy, cwd=tmp_path)
    python, clawgate = venv / "bin" / "python", venv / "bin" / "clawgate"

    # both top-level worlds side by side, each from its own wheel
    where = run(python, "-c", "import config, clawgate.config, clawgate.gateway.cli as cli; "
                "print(config.WHO); print(cli.__file__)", cwd=tmp_path).split()
    assert where[0] == "dummy"
    assert where[1].startswith(str(venv)), where[1]
    assert run(clawgate, "--version", cwd=tmp_path).strip().endswith("0.1.0")

    with FakeAnthropic() as fake:
        fake.enqueue(text("hello from the installed wheel"))
        daemon = DaemonProcess(tmp_path / "home", anthropic_url=fake.base_url)
        env = {**daemon.env, "PATH": f"{venv / 'bin'}{os.pathsep}{daemon.env['PATH']}"}
        run(clawgate, "init", "--yes", cwd=tmp_path, env=env)
        proc = subprocess.Popen([str(clawgate), "gateway"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        output: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                output.append(line)
                if "gateway ready" in line:
                    ready.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 60
            while not ready.wait(0.1):
                assert proc.poll() is None and time.monotonic() < deadline, "".join(output[-40:])
            # `clawgate chat` sends the message over the gateway's WebSocket
            reply = run(clawgate, "chat", "-m", "hello?", "--session", "wheel", cwd=tmp_path, env=env)
            assert reply.strip() == "hello from the installed wheel"
        finally:
            proc.kill()
            proc.wait(10)
            reader.join(2)
    assert "".join(output).count("Traceback") == 0, "".join(output)
