"""The kit fills the protocols its parts and its adapters are written against (channels/kit/adapter.py
AdapterKit, intake.py IntakeKit): a member added to a protocol, or renamed on the kit, fails here, not in
a platform at run time."""

from __future__ import annotations

import inspect

import pytest

from clawgate.channels.kit import AdapterKit
from clawgate.channels.kit.adapter import PlatformAdapter
from clawgate.channels.kit.intake import IntakeKit
from tests.unit.channels.kit.support import make_kit


def members(protocol: type) -> set[str]:
    """The names a protocol declares: its annotated attributes, methods and properties."""
    declared = set(getattr(protocol, "__annotations__", {}))
    declared |= {name for name, value in vars(protocol).items()
                 if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))}
    return declared


@pytest.mark.parametrize("protocol", [AdapterKit, IntakeKit], ids=lambda p: p.__name__)
def test_an_attached_kit_has_every_member_of_the_protocol(protocol: type) -> None:
    kit, _adapter, _inbox = make_kit()
    assert len(members(protocol)) >= 10, "the protocol's members were not read"
    missing = sorted(name for name in members(protocol) if not hasattr(kit, name))
    assert missing == [], f"ChannelKit lacks {protocol.__name__} members: {missing}"


def test_an_adapter_is_given_its_kit_as_the_contract() -> None:
    """PlatformAdapter's constructor names AdapterKit, not the ChannelKit class (which builds on it)."""
    assert inspect.signature(PlatformAdapter.__init__).parameters["kit"].annotation == "AdapterKit"
