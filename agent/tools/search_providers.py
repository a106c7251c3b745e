"""The search providers `web_search` asks: Brave Search API, Tavily, SearXNG and keyless DuckDuckGo.

Each provider turns one query into a list of results, or raises ProviderFailed with a one-line reason
(rate limit, quota, rejected key, unreachable) so the tool can move on to the next provider of the
owner's chain and, when none answers, tell the model every reason in one line.

Every address here comes from the owner's config, never from the model or a page: that is why a
SearXNG instance on the local network is reached without the private-address approval web_fetch asks
for. The query and parameters are the model's; they travel as encoded parameters, never as a URL.
The API keys go in headers and never into a message.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

if TYPE_CHECKING:  # httpx is imported by the first search, like web_fetch
    import httpx

    from clawgate.config.web_tools import WebSearchSettings

Freshness = Literal["day", "week", "month", "year"]
_TAG = re.compile(r"<[^>]+>")
SNIPPET_CHARS = 400
USER_AGENT = "clawgate/0.1"


@dataclass(frozen=True)
class SearchQuery:
    """What the model asked for: the words, how many results, how recent, one site only."""

    query: str
    count: int
    freshness: Freshness | None = None
    site: str | None = None

    def with_site(self) -> str:
        """The query with the `site:` operator (Brave, SearXNG and DuckDuckGo understand it)."""
        return f"{self.query} site:{self.site}" if self.site else self.query


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str
    date: str | None = None


class ProviderFailed(Exception):
    """A provider gave no results this time; the message is one line saying why and names the provider."""


class SearchProvider(Protocol):
    name: str

    async def search(self, query: SearchQuery) -> list[SearchResult]: ...


def _text(value: Any, cap: int = SNIPPET_CHARS) -> str:
    """A provider's string field as plain text: highlight tags dropped, entities decoded, one line, capped."""
    from html import unescape  # its entity table is built at the first search, not at start

    text = " ".join(unescape(_TAG.sub("", str(value or ""))).split())
    return text if len(text) <= cap else text[:cap] + "…"


def _result(title: Any, url: Any, snippet: Any, date: Any = None) -> SearchResult | None:
    """A result only when its URL is a web address (a provider or an indexed page could put anything there)."""
    url = str(url or "").strip()
    if not url.lower().startswith(("http://", "https://")):
        return None
    return SearchResult(_text(title, 200) or url, url, _text(snippet), _text(date, 40) or None)


def _detail(response: "httpx.Response") -> str:
    """The provider's own error text, short, from the JSON shapes the providers use."""
    try:
        body = response.json()
    except ValueError:
        return _text(response.text, 160)
    if isinstance(body, dict):
        for found in (body.get("error"), body.get("detail"), body.get("message")):
            if isinstance(found, dict):
                found = found.get("detail") or found.get("error") or found.get("message") or found.get("code")
            if found:
                return _text(found, 160)
    return ""


class _HttpProvider:
    """Shared by the three HTTP APIs: one client per call, no proxy from the environment, a timeout."""

    name = ""

    def __init__(self, base_url: str, timeout: float, transport: "httpx.AsyncBaseTransport | None" = None) -> None:
        self.base = base_url.rstrip("/")
        self.timeout = timeout
        self.transport = transport

    async def _request(self, method: str, path: str, **kwargs: Any) -> "httpx.Response":
        import httpx

        try:
            async with httpx.AsyncClient(timeout=self.timeout, transport=self.transport, trust_env=False,
                                         headers={"user-agent": USER_AGENT}) as client:
                response = await client.request(method, self.base + path, **kwargs)
        except httpx.HTTPError as exc:
            raise ProviderFailed(f"{self.name}: cannot reach {self.base}: {type(exc).__name__}") from None
        if response.status_code == 200:
            return response
        raise ProviderFailed(self._failure(response))

    def _failure(self, response: "httpx.Response") -> str:
        detail = _detail(response)
        said = f" ({detail})" if detail else ""
        if response.status_code == 429:
            wait = response.headers.get("retry-after")
            return f"{self.name}: rate limit or quota reached (HTTP 429{said})" + (f", retry after {wait}s" if wait else "")
        if response.status_code in (401, 403):
            return f"{self.name}: the API key was refused (HTTP {response.status_code}{said})"
        return f"{self.name}: HTTP {response.status_code}{said}"

    def _json(self, response: "httpx.Response") -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise ProviderFailed(f"{self.name}: the answer is not JSON") from None
        if not isinstance(body, dict):
            raise ProviderFailed(f"{self.name}: the answer is not a JSON object")
        return body


class BraveSearch(_HttpProvider):
    """GET /res/v1/web/search with the X-Subscription-Token header (api-dashboard.search.brave.com)."""

    name = "brave"
    FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}

    def __init__(self, api_key: str, base_url: str, timeout: float, transport: "httpx.AsyncBaseTransport | None" = None) -> None:
        super().__init__(base_url, timeout, transport)
        self.api_key = api_key

    def _failure(self, response: "httpx.Response") -> str:
        if response.status_code == 422 and "TOKEN" in response.text.upper():  # Brave answers a bad token with 422
            return f"{self.name}: the API key was refused (HTTP 422 ({_detail(response)}))"
        return super()._failure(response)

    async def search(self, query: SearchQuery) -> list[SearchResult]:
        params: dict[str, Any] = {"q": query.with_site(), "count": query.count}
        if query.freshness:
            params["freshness"] = self.FRESHNESS[query.freshness]
        response = await self._request("GET", "/res/v1/web/search", params=params, headers={
            "accept": "application/json", "x-subscription-token": self.api_key})
        items = (self._json(response).get("web") or {}).get("results") or []
        found = (_result(i.get("title"), i.get("url"), i.get("description"), i.get("page_age") or i.get("age"))
                 for i in items if isinstance(i, dict))
        return [r for r in found if r][: query.count]


class TavilySearch(_HttpProvider):
    """POST /search with a Bearer key (docs.tavily.com); 432/433 are its plan and pay-as-you-go limits."""

    name = "tavily"

    def __init__(self, api_key: str, base_url: str, timeout: float, transport: "httpx.AsyncBaseTransport | None" = None) -> None:
        super().__init__(base_url, timeout, transport)
        self.api_key = api_key

    def _failure(self, response: "httpx.Response") -> str:
        if response.status_code in (432, 433):
            which = "plan" if response.status_code == 432 else "pay-as-you-go"
            return f"{self.name}: the {which} credit limit is reached (HTTP {response.status_code})"
        return super()._failure(response)

    async def search(self, query: SearchQuery) -> list[SearchResult]:
        body: dict[str, Any] = {"query": query.query, "max_results": query.count, "search_depth": "basic"}
        if query.freshness:
            body["time_range"] = query.freshness
        if query.site:
            body["include_domains"] = [query.site]
        response = await self._request("POST", "/search", json=body,
                                       headers={"authorization": f"Bearer {self.api_key}"})
        items = self._json(response).get("results") or []
        found = (_result(i.get("title"), i.get("url"), i.get("content"), i.get("published_date"))
                 for i in items if isinstance(i, dict))
        return [r for r in found if r][: query.count]


class SearxngSearch(_HttpProvider):
    """GET /search?format=json on the owner's instance (docs.searxng.org/dev/search_api)."""

    name = "searxng"

    def _failure(self, response: "httpx.Response") -> str:
        if response.status_code == 403:
            return (f"{self.name}: {self.base} refuses format=json (HTTP 403): add json to search.formats "
                    "in its settings.yml")
        return super()._failure(response)

    async def search(self, query: SearchQuery) -> list[SearchResult]:
        params: dict[str, Any] = {"q": query.with_site(), "format": "json", "pageno": 1}
        if query.freshness:
            params["time_range"] = query.freshness
        response = await self._request("GET", "/search", params=params, headers={"accept": "application/json"})
        items = self._json(response).get("results") or []
        found = (_result(i.get("title"), i.get("url"), i.get("content"), i.get("publishedDate"))
                 for i in items if isinstance(i, dict))
        return [r for r in found if r][: query.count]  # SearXNG has no count parameter: cut here


class DuckDuckGoSearch:
    """Keyless: DuckDuckGo's HTML results through the `ddgs` library (blocking, so run in a thread).

    `client` builds the library's DDGS object (timeout in seconds); tests hand in their own."""

    name = "duckduckgo"
    TIMELIMIT = {"day": "d", "week": "w", "month": "m", "year": "y"}

    def __init__(self, timeout: float, client: Callable[[int], Any] | None = None) -> None:
        self.timeout = timeout
        self.client = client

    def _make(self) -> Any:
        if self.client is not None:
            return self.client(max(1, round(self.timeout)))
        try:
            from ddgs import DDGS
        except ImportError:
            raise ProviderFailed("duckduckgo: the `ddgs` package is missing: pip install ddgs "
                                 "(or configure another provider in tools.web_search.providers)") from None
        return DDGS(timeout=max(1, round(self.timeout)))

    def _run(self, query: SearchQuery) -> list[dict[str, Any]]:
        from_ddgs = _ddgs_errors()
        try:
            return list(self._make().text(query.with_site(), max_results=query.count, backend="duckduckgo",
                                          timelimit=self.TIMELIMIT[query.freshness] if query.freshness else None))
        except from_ddgs["RatelimitException"]:
            raise ProviderFailed("duckduckgo: rate limited (too many searches from this address); try later") from None
        except from_ddgs["TimeoutException"]:
            raise ProviderFailed(f"duckduckgo: no answer within {self.timeout:g}s") from None
        except from_ddgs["DDGSException"] as exc:
            if "no results" in str(exc).lower():
                return []
            raise ProviderFailed(f"duckduckgo: {_text(exc, 160)}") from None

    async def search(self, query: SearchQuery) -> list[SearchResult]:
        items = await asyncio.to_thread(self._run, query)
        found = (_result(i.get("title"), i.get("href"), i.get("body")) for i in items if isinstance(i, dict))
        return [r for r in found if r][: query.count]


def _ddgs_errors() -> dict[str, type[BaseException]]:
    """The library's exception classes; stand-ins that never match when it is not installed (a fake client)."""
    try:
        from ddgs import exceptions
    except ImportError:
        class _Never(Exception):
            pass
        return {"RatelimitException": _Never, "TimeoutException": _Never, "DDGSException": _Never}
    return {"RatelimitException": exceptions.RatelimitException, "TimeoutException": exceptions.TimeoutException,
            "DDGSException": exceptions.DDGSException}


def build_chain(settings: "WebSearchSettings", transport: "httpx.AsyncBaseTransport | None" = None,
                ddgs_client: Callable[[int], Any] | None = None) -> list[SearchProvider]:
    """The providers in the owner's order (config/web_tools.py checked each has what it needs)."""
    chain: list[SearchProvider] = []
    timeout = settings.timeout_seconds
    for name in settings.providers:
        if name == "brave" and settings.brave_api_key:
            chain.append(BraveSearch(settings.brave_api_key, settings.brave_url, timeout, transport))
        elif name == "tavily" and settings.tavily_api_key:
            chain.append(TavilySearch(settings.tavily_api_key, settings.tavily_url, timeout, transport))
        elif name == "searxng" and settings.searxng_url:
            chain.append(SearxngSearch(settings.searxng_url, timeout, transport))
        elif name == "duckduckgo":
            chain.append(DuckDuckGoSearch(timeout, ddgs_client))
    return chain
