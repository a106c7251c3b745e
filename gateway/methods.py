"""The method table: each gateway method with its params model and a one-line description.

Handlers are `async (services, connection, params) -> payload`, registered with `@method`
(Home Assistant's websocket_api style) in the modules of gateway/api/. The table is the
documentation: `connect` returns it, and docs/protocol.md mirrors it. Errors have one shape:
a DomainError raised by a service becomes its protocol code here, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict, ValidationError

from clawgate.agent.core.errors import DomainError
from clawgate.agent.services import Services

from . import protocol

if TYPE_CHECKING:
    from .connection import Connection

# DomainError.code -> protocol error code (today they coincide; the mapping is the contract).
_DOMAIN_CODES = {
    "not_found": protocol.NOT_FOUND,
    "conflict": protocol.CONFLICT,
    "invalid_params": protocol.INVALID_PARAMS,
    "forbidden": protocol.FORBIDDEN,
    "unavailable": protocol.UNAVAILABLE,
}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # built after the ready line (runtime.py)


class MethodError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


Handler = Callable[[Services, "Connection", Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Method:
    name: str
    params: type[Params]
    handler: Handler
    description: str


REGISTRY: dict[str, Method] = {}


def method(name: str, params: type[Params], description: str) -> Callable[[Handler], Handler]:
    """Register a handler under `name`; importing its module is what makes it available."""
    def register(handler: Handler) -> Handler:
        if name in REGISTRY:
            raise ValueError(f"gateway method {name!r} is registered twice")
        REGISTRY[name] = Method(name, params, handler, description)
        return handler
    return register


class MethodTable:
    def __init__(self, services: Services, methods: dict[str, Method]) -> None:
        self.services = services
        self._methods = dict(methods)

    def names(self) -> list[str]:
        return sorted(self._methods)

    def describe(self) -> list[dict[str, str]]:
        return [{"name": m.name, "description": m.description} for m in sorted(self._methods.values(), key=lambda m: m.name)]

    async def call(self, conn: "Connection", request: protocol.Request) -> dict[str, Any]:
        method = self._methods.get(request.method)
        if method is None:
            raise MethodError(protocol.UNKNOWN_METHOD, f"unknown method {request.method!r}; the connect reply lists the methods")
        try:
            params = method.params.model_validate(request.params)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "params"
            raise MethodError(protocol.INVALID_PARAMS, f"{request.method}: {where}: {first['msg']}") from None
        try:
            return await method.handler(self.services, conn, params)
        except DomainError as exc:
            raise MethodError(_DOMAIN_CODES.get(exc.code, protocol.INVALID_PARAMS), exc.message) from None
