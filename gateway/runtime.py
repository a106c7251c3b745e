"""The daemon process's runtime: which event loop it runs on, and how its garbage collector runs.

Every message is a few hundred event-loop callbacks (WebSocket frames, the model's streamed
events, timers, worker hand-offs), so the loop's own overhead is a visible share of a message's
CPU: uvloop (libuv, in C) serves the same asyncio API with less of it. It is used when it is
installed (every platform but Windows); `gateway.event_loop = "asyncio"` keeps the standard loop.

The cyclic garbage collector: the daemon imports hundreds of thousands of long-lived objects at
start (the model SDK's types above all), and every full collection walked them all again (tens of
milliseconds, each time a stall of every session). Once started they are frozen out of the
collector's view (`gc.freeze`), and young collections run less often: the objects alive in the
middle of a busy message are the same whether the collector looks 700 or 10,000 allocations
apart, so looking less often costs less in total. Memory still goes back at once for everything
without cycles (reference counting); only cyclic garbage waits a little longer. The start itself
runs with the collector off (the imports make almost no cyclic garbage, and collecting while they
load walks the same new objects again and again); it is turned on, after a first freeze, at the
ready line.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterator, Literal, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel

log = logging.getLogger(__name__)

T = TypeVar("T")
EventLoopChoice = Literal["auto", "uvloop", "asyncio"]
YOUNG_COLLECTION_EVERY = 10_000  # allocations (the interpreter's default: 700)


class RuntimeUnavailable(Exception):
    """The configured event loop cannot be used here; the message says what to do."""


def loop_factory(choice: EventLoopChoice) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for `asyncio.Runner` (None: the standard loop)."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise RuntimeUnavailable("gateway.event_loop is 'uvloop' but uvloop is not installed; install it "
                                     "(pip install uvloop) or set gateway.event_loop = \"auto\"") from None
        return None
    new_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return new_loop


def run(main: Coroutine[Any, Any, T], choice: EventLoopChoice = "auto") -> T:
    """asyncio.run(main) on the chosen event loop."""
    factory = loop_factory(choice)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def event_loop_name() -> str:
    """'uvloop' or 'asyncio': the loop running now (the `status` method reports it)."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def collect_from_now() -> None:
    """The collector back on after a start that ran without it (gateway/cli/__init__.py): what the start
    built is frozen first, so the first young collection does not walk all of it at once on the event loop."""
    gc.freeze()
    gc.enable()


def settle_heap() -> None:
    """Call once the daemon has started and imported what it serves with: what exists now is
    kept out of every later collection, and young collections run less often."""
    # No collection first: a full one now (~0.1 s) would stall the first messages; the little
    # cyclic garbage of start-up stays frozen with the rest.
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, old)


def deferred_models(root: type["BaseModel"], package: str = "clawgate.") -> Iterator[type["BaseModel"]]:
    """The models of `package` whose validator is not built yet: those declared with `defer_build`
    (tool arguments, gateway method parameters, the supervisors' answers)."""
    seen: set[type] = set()
    stack = [root]
    while stack:
        for model in stack.pop().__subclasses__():
            if model in seen:
                continue
            seen.add(model)
            stack.append(model)
            if model.__module__.startswith(package) and not model.__pydantic_complete__:
                yield model


async def build_deferred_models() -> int:
    """After the ready line: build the deferred models one per event-loop turn, so the first call of a
    tool or method finds its validator ready and a client's frame waits behind one model's build at
    most. Returns how many were built; a model that cannot be built is logged (its first use would
    raise the same error)."""
    from pydantic import BaseModel

    built = 0
    for model in list(deferred_models(BaseModel)):
        await asyncio.sleep(0)
        if model.__pydantic_complete__:  # built meanwhile by its first use
            continue
        try:
            model.model_rebuild()
            built += 1
        except Exception as exc:  # a bug in a model's declaration: say which, keep serving
            log.error("could not build the model %s.%s: %s", model.__module__, model.__qualname__, exc)
    return built
