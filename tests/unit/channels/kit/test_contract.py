"""The kit fills the protocols its parts and its adapters are written against (channels/kit/adapter.py
AdapterKit, intake.py IntakeKit): a member added to a protocol, or renamed on the kit, fails here, not in
a platform at run time; and adapters use no kit member outside AdapterKit (one that exists on ChannelKit
today is no promise: a kit keeping the contract may drop it, breaking a path, a button press, no test walks)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

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


CHANNELS = Path(__file__).resolve().parents[4] / "channels"
KIT_NAMES = {"kit", "_kit"}


def _is_kit(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id in KIT_NAMES) or (
        isinstance(node, ast.Attribute) and node.attr in KIT_NAMES)


def kit_uses(source: str) -> list[tuple[int, str]]:
    """(line, attribute) of every `kit.<attribute>`, `<...>.kit.<attribute>` and `getattr(kit, "<attribute>")`
    in a module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_kit(node.value):
            found.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and len(node.args) >= 2 and _is_kit(node.args[0]) and isinstance(node.args[1], ast.Constant)):
            found.append((node.lineno, str(node.args[1].value)))
    return sorted(found)


def adapter_modules() -> list[Path]:
    """Every module of every channel package but the kit's own."""
    return sorted(p for p in CHANNELS.glob("*/**/*.py") if p.relative_to(CHANNELS).parts[0] != "kit")


def test_the_scan_sees_adapters_using_their_kit() -> None:
    assert kit_uses("self.kit.receive(x)\nkit.store.kv_get('a')\nself.adapter.kit.log.info('x')\n"
                    "getattr(self.kit, 'say', None)\n") == [(1, "receive"), (2, "store"), (3, "log"), (4, "say")]
    modules = adapter_modules()
    assert len(modules) > 40 and any(p.parts[-2:] == ("whatsapp", "adapter.py") for p in modules)
    used = {attr for path in modules for _, attr in kit_uses(path.read_text(encoding="utf-8"))}
    assert {"receive", "approval_answer", "store", "log"} <= used  # the scan finds the ordinary uses


def test_adapters_use_their_kit_only_through_the_contract() -> None:
    allowed = members(AdapterKit)
    outside = [f"{path.relative_to(CHANNELS.parent)}:{line}: kit.{attr}"
               for path in adapter_modules() for line, attr in kit_uses(path.read_text(encoding="utf-8"))
               if attr not in allowed]
    assert not outside, "adapters using the kit outside AdapterKit:\n" + "\n".join(outside)
