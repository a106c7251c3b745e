"""The anthropic SDK, loaded with only what a message request needs.

`import anthropic` defines every type of the whole API at once (about 2,400 modules of pydantic
models: ~50 MB resident, most of the daemon's memory at rest), because the package's
`__init__` imports all of `anthropic.types` and, through its Vertex/Bedrock clients, all of
`anthropic.resources`. The message path uses the client class, its base client, the error
classes and the SSE decoder, which need only a fraction of them.

`load()` imports those submodules under a package whose `__init__` has not run yet, and makes the
`__init__` of `anthropic.types*` and `anthropic.resources*` (plain lists of re-exports) import a
name's module when the name is first used. Nothing is changed in the SDK's code: anything that
reads a public name of the top-level package (`anthropic.Anthropic`, `anthropic.types.Message`,
say) gets the SDK as usual; the first such read runs the package's real `__init__` then. When
`anthropic` was already imported (by a test, another library), `load()` uses it as it is.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any, Sequence

LAZY_PACKAGES = ("anthropic.types", "anthropic.resources")
_lock = threading.Lock()


def load() -> ModuleType:
    """The `anthropic` package with its client, base client, errors and streaming imported."""
    with _lock:
        if "anthropic" not in sys.modules:
            _install()
        for name in ("anthropic._client", "anthropic._base_client", "anthropic._exceptions", "anthropic._streaming"):
            importlib.import_module(name)
        return sys.modules["anthropic"]


def _install() -> None:
    spec = importlib.util.find_spec("anthropic")
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError("No module named 'anthropic'", name="anthropic")
    if not any(isinstance(finder, _ReExportsFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _ReExportsFinder())
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    whole = threading.Lock()

    def __getattr__(name: str) -> Any:
        """A public name: run the package's own `__init__` once, then answer from it."""
        if name.startswith("__"):
            raise AttributeError(name)
        if name.startswith("_"):  # a private submodule (`from anthropic import _exceptions`)
            try:
                return importlib.import_module(f"anthropic.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"anthropic.{name}":
                    raise
        with whole:
            if package.__dict__.get("__getattr__") is __getattr__:
                del package.__dict__["__getattr__"]
                loader.exec_module(package)
        try:
            return package.__dict__[name]
        except KeyError:
            getter = package.__dict__.get("__getattr__")
            if getter is not None and getter is not __getattr__:
                return getter(name)
            raise AttributeError(f"module 'anthropic' has no attribute {name!r}") from None

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules["anthropic"] = package


class _ReExportsFinder(importlib.abc.MetaPathFinder):
    """Finds the SDK's type and resource packages and gives them the lazy loader below."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(LAZY_PACKAGES):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations or spec.loader is None:
            return spec
        spec.loader = _ReExportsLoader(spec.loader)
        return spec


class _ReExportsLoader(importlib.abc.Loader):
    """Runs a package `__init__` made only of `from .x import Name as Name` lines as a map from
    each name to its module, imported at the name's first use; any other `__init__` runs as written."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        names = _re_exports(self.real.get_source(module.__name__) or "")
        if names is None:
            self.real.exec_module(module)
            return
        package = module.__name__

        def __getattr__(name: str) -> Any:
            where = names.get(name)
            if where is None:
                try:
                    return importlib.import_module(f"{package}.{name}")
                except ModuleNotFoundError as exc:
                    if exc.name != f"{package}.{name}":
                        raise
                    raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
            value = getattr(importlib.import_module(f"{package}.{where[0]}"), where[1])
            setattr(module, name, value)
            return value

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__all__ = list(names)


def _re_exports(source: str) -> dict[str, tuple[str, str]] | None:
    """name -> (submodule, its name there); None when the source does anything else."""
    names: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
            return None
        for alias in node.names:
            if alias.name == "*":
                return None
            names[alias.asname or alias.name] = (node.module, alias.name)
    return names
