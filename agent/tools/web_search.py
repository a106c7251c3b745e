"""`web_search`: ask the owner's search providers, in order, and hand the results over as untrusted data.

Titles and snippets are written by whoever runs the indexed pages, so the results are wrapped like a
fetched page (`wrap_untrusted`): the registry sees the block and the rest of the run is tainted, exactly
as after web_fetch. The providers are fixed by the owner's config (agent/tools/search_providers.py), so a
search needs no approval: the only thing the model chooses is the query and its filters.

The same search asked twice in one run is answered from memory (a model that repeats itself costs no
quota); a different run asks again, since results change.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable

from pydantic import Field

from ..trust.untrusted import wrap_untrusted
from .base import Args, Tool, ToolContext, ToolError
from .search_providers import Freshness, ProviderFailed, SearchProvider, SearchQuery, SearchResult, build_chain

if TYPE_CHECKING:
    import httpx

    from clawgate.config.web_tools import WebSearchSettings

CACHE_ENTRIES = 256  # searches remembered across all running runs (each a few kB)
# A bare domain name (no scheme, port or path): what `site:` and Tavily's include_domains accept.
SITE = r"^([A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,63}$"


class WebSearch(Tool):
    name = "web_search"
    description = ("Search the web: results (title, URL, snippet, date) as untrusted data; read one with web_fetch. "
                   "freshness: recent pages only; site: one domain (e.g. docs.python.org).")
    recovery = "rerun"  # reads only: after a crash the search is simply asked again
    concurrent = True

    class Arguments(Args):
        query: str = Field(min_length=1, max_length=400)
        count: int | None = Field(None, ge=1, le=20)
        freshness: Freshness | None = None
        site: str | None = Field(None, pattern=SITE, max_length=253)

    def __init__(self, settings: "WebSearchSettings", chain: list[SearchProvider] | None = None,
                 transport: "httpx.AsyncBaseTransport | None" = None,
                 ddgs_client: Callable[[int], Any] | None = None) -> None:
        self.default_count = settings.default_count
        self.chain = chain if chain is not None else build_chain(settings, transport, ddgs_client)
        self._cache: OrderedDict[tuple[str, ...], tuple[str, list[SearchResult]]] = OrderedDict()

    async def run(self, args: Arguments, ctx: ToolContext) -> str:  # type: ignore[override]
        query = SearchQuery(" ".join(args.query.split()), args.count or self.default_count, args.freshness,
                            args.site.lower() if args.site else None)
        key = (ctx.run_id, query.query, str(query.count), query.freshness or "", query.site or "")
        if (hit := self._cache.get(key)) is not None:
            self._cache.move_to_end(key)
            return self._render(query, *hit, cached=True)
        failures: list[str] = []
        for provider in self.chain:
            try:
                results = await provider.search(query)
            except ProviderFailed as exc:
                failures.append(str(exc))
                continue
            self._remember(key, (provider.name, results))
            return self._render(query, provider.name, results, cached=False)
        raise ToolError("web search failed: " + "; ".join(failures or ["no provider is configured"]),
                        "try again later, or read a known page with web_fetch; the owner can add a provider "
                        "(tools.web_search.providers, docs/browser.md)")

    def _remember(self, key: tuple[str, ...], value: tuple[str, list[SearchResult]]) -> None:
        self._cache[key] = value
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)

    @staticmethod
    def _render(query: SearchQuery, provider: str, results: list[SearchResult], *, cached: bool) -> str:
        filters = "".join(f", {k} {v}" for k, v in (("freshness", query.freshness), ("site", query.site)) if v)
        head = f"web_search ({provider}{filters}): {len(results)} result(s)" + (" (again, from this run)" if cached else "")
        if not results:
            return head + "\nNo results. Try other words, a wider freshness, or no site filter."
        lines: list[str] = []
        for number, result in enumerate(results, 1):
            lines.append(f"{number}. {result.title}\n   {result.url}" + (f"\n   date: {result.date}" if result.date else "")
                         + (f"\n   {result.snippet}" if result.snippet else ""))
        return head + "\n" + wrap_untrusted(f"web_search {provider}: {query.with_site()}", "\n".join(lines))
