"""One scan of the installed entry points answers every plugin lookup made inside the scope."""

from __future__ import annotations

import importlib.metadata as metadata

import pytest

from clawgate.config import entry_point_scan
from clawgate.config.entry_point_scan import one_entry_point_scan


def test_lookups_inside_answer_as_the_standard_function_and_walk_the_distributions_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    standard = metadata.entry_points
    groups = ("console_scripts", "pydantic", "apscheduler.triggers", "clawgate.channels")
    expected = {group: sorted(standard(group=group), key=str) for group in groups}
    assert expected["console_scripts"] and expected["apscheduler.triggers"]  # a real install has these
    entry_point_scan._every_entry_point.cache_clear()
    walks = []
    real_distributions = metadata.distributions
    monkeypatch.setattr(metadata, "distributions", lambda **kw: walks.append(1) or real_distributions(**kw))
    with one_entry_point_scan():
        bound = metadata.entry_points  # what `from importlib.metadata import entry_points` binds inside
        for group in groups:
            assert sorted(metadata.entry_points(group=group), key=str) == expected[group]
        with one_entry_point_scan():  # nested: the same scan
            assert sorted(metadata.entry_points(group="pydantic"), key=str) == expected["pydantic"]
        assert metadata.entry_points is bound
    assert len(walks) == 1
    assert metadata.entry_points is standard  # restored
    walks.clear()
    assert sorted(bound(group="console_scripts"), key=str) == expected["console_scripts"]
    assert walks == [1]  # a function bound inside asks the standard one after the scope
