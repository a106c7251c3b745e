"""The method table: each gateway method with its params model and a one-line description.

The table is the documentation: `connect` returns it, and docs/protocol.md mirrors it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict, ValidationError

from . import protocol

if TYPE_CHECKING:
    from .server import Connection


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MethodError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


Handler = Callable[["Connection", Any], Awaitable[dict[str, Any]]]


@dataclass
class Method:
    name: str
    params: type[Params]
    handler: Handler
    description: str


class MethodTable:
    def __init__(self) -> None:
        self._methods: dict[str, Method] = {}

    def add(self, name: str, params: type[Params], description: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self._methods[name] = Method(name, params, handler, description)
            return handler
        return register

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
        return await method.handler(conn, params)
