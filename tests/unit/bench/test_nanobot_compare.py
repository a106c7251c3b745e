"""The side-by-side bench's own logic: percentiles, ratio, verdict, table, one-line failure.

Nothing here installs or starts nanobot (CI must not depend on PyPI); the bench itself is run by hand.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


def load() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("nanobot_compare", BENCH / "nanobot_compare.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_rows_give_percentiles_and_how_many_times_faster_clawgate_is() -> None:
    bench = load()
    claw = [float(v) for v in range(1, 101)]  # p50 51, p90 91, p99 100 (nearest rank, as core_bench)
    nano = [v * 20 for v in claw]
    rows = {r[0]: r for r in bench.comparison_rows(claw, nano, [v + 2 for v in nano])}
    assert rows["round trip p50"][1:] == ("51.0 ms", "1020.0 ms", "20.0x")
    assert rows["round trip p99"][1:] == ("100.0 ms", "2000.0 ms", "20.0x")
    assert rows["nanobot to turn_end p50"][2] == "1022.0 ms"


def test_verdict_is_met_only_at_the_goal_ratio() -> None:
    bench = load()
    assert bench.verdict([10.0], [200.0]).endswith("20.0x, met")
    assert bench.verdict([10.0], [199.0]).endswith("19.9x, not met")


def test_table_is_markdown_with_aligned_columns() -> None:
    bench = load()
    table = bench.format_table([("round trip p50", "18.0 ms", "162.0 ms", "9.0x")]).splitlines()
    assert table[0].startswith("| measure") and "nanobot 0.3.5" in table[0]
    assert set(table[1]) <= {"|", "-"}
    assert len({len(line) for line in table}) == 1


def test_nanobot_that_cannot_be_installed_is_one_line_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bench = load()

    def refuse(venv: Path) -> Path:
        raise bench.Unavailable("pip could not install nanobot-ai==0.3.5: ERROR: No matching distribution")

    monkeypatch.setattr(bench, "ensure_venv", refuse)
    monkeypatch.setattr(sys, "argv", ["nanobot_compare.py"])
    assert bench.main() == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("nanobot_compare: pip could not install nanobot-ai==0.3.5")
