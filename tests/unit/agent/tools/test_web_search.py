"""web_search against fake provider servers that speak each provider's published API (tests/fakes/search_api.py),
and the keyless DuckDuckGo provider at the `ddgs` library's boundary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.core.events import EventHub
from clawgate.agent.tools import ToolContext, ToolRegistry
from clawgate.agent.tools.files import WriteFile
from clawgate.agent.tools.ledger import WrittenLedger
from clawgate.agent.tools.search_providers import DuckDuckGoSearch
from clawgate.agent.tools.web_search import WebSearch
from clawgate.config.loader import ConfigError, load_settings
from clawgate.config.paths import Paths
from clawgate.config.web_tools import WebSearchSettings
from clawgate.workspace.guard import WorkspaceGuard
from tests.fakes.search_api import BRAVE_KEY, TAVILY_KEY, fake_search


def registry_with(tool: WebSearch, tmp_path: Path) -> tuple[ToolRegistry, ToolContext]:
    registry = ToolRegistry([tool, WriteFile(WrittenLedger(None))], events=EventHub(),
                            approvals=ApprovalBroker(EventHub(), mode="deny"))
    ctx = ToolContext(session_key="s", channel="gateway", chat_id="s", sender_id="u1", run_id="r1",
                      workspace=WorkspaceGuard(tmp_path / "ws"), owner=True)
    return registry, ctx


async def search(registry: ToolRegistry, ctx: ToolContext, **args: Any):
    return await registry.execute({"id": "t1", "name": "web_search", "input": args}, ctx)


async def test_brave_results_are_untrusted_and_taint_the_run(tmp_path: Path) -> None:
    with fake_search("brave") as brave:
        tool = WebSearch(WebSearchSettings(providers=["brave"], brave_api_key=BRAVE_KEY, brave_url=brave.base_url))
        registry, ctx = registry_with(tool, tmp_path)
        out = await search(registry, ctx, query="cinema  tonight", count=2, freshness="week", site="Cinema.example")
        assert not out.is_error, out.content
        seen = brave.requests[0]
        assert seen.params == {"q": "cinema tonight site:cinema.example", "count": "2", "freshness": "pw"}
        assert seen.headers["x-subscription-token"] == BRAVE_KEY and seen.headers["accept"] == "application/json"
    assert out.content.startswith("web_search (brave, freshness week, site cinema.example): 2 result(s)")
    assert '<untrusted-data id="' in out.content and 'source="web_search brave: cinema tonight site:cinema.example"' in out.content
    assert "1. Cinema tonight listings\n   https://cinema.example/tonight\n   date: 2026-11-28T10:00:00" in out.content
    assert "More films & times" in out.content and "javascript:" not in out.content
    assert ctx.taint.tainted and "web_search brave" in ctx.taint.sources[0]
    # the injected instruction in a snippet cannot make a lasting change on its own: writing memory waits for the owner
    write = await registry.execute({"id": "t2", "name": "write_file",
                                    "input": {"path": "memory/notes.md", "content": "x"}}, ctx)
    assert write.status == "denied" and "untrusted content entered this run" in write.content


async def test_tavily_gets_its_json_body_and_bearer_key(tmp_path: Path) -> None:
    with fake_search("tavily") as tavily:
        tool = WebSearch(WebSearchSettings(providers=["tavily"], tavily_api_key=TAVILY_KEY, tavily_url=tavily.base_url))
        registry, ctx = registry_with(tool, tmp_path)
        out = await search(registry, ctx, query="films", count=1, freshness="day", site="films.example")
        seen = tavily.requests[0]
    assert seen.method == "POST" and seen.headers["authorization"] == f"Bearer {TAVILY_KEY}"
    assert seen.body == {"query": "films", "max_results": 1, "search_depth": "basic", "time_range": "day",
                         "include_domains": ["films.example"]}
    assert "1 result(s)" in out.content and "https://cinema.example/tonight" in out.content


async def test_searxng_on_a_private_address_is_used_without_approval(tmp_path: Path) -> None:
    """The owner configured the instance: its loopback address is not a reason to ask."""
    with fake_search("searxng") as searx:
        tool = WebSearch(WebSearchSettings(providers=["searxng"], searxng_url=searx.base_url, default_count=1))
        registry, ctx = registry_with(tool, tmp_path)
        out = await search(registry, ctx, query="films", freshness="month")
        seen = searx.requests[0]
        assert seen.params == {"q": "films", "format": "json", "pageno": "1", "time_range": "month"}
        assert out.status == "ok" and "1 result(s)" in out.content  # no count parameter in SearXNG: cut here
        searx.fail_with = (403, None, {})
        refused = await search(registry, ctx, query="other")
    assert refused.is_error and "add json to search.formats" in refused.content
    assert len(refused.content.splitlines()) == 2 and "Traceback" not in refused.content  # error + fix


async def test_a_rate_limited_provider_falls_back_to_the_next(tmp_path: Path) -> None:
    with fake_search("brave") as brave, fake_search("searxng") as searx:
        brave.fail_with = (429, {"type": "ErrorResponse", "error": {"code": "RATE_LIMITED", "detail": "Request rate limit exceeded"}},
                           {"retry-after": "1", "x-ratelimit-remaining": "0, 0"})
        tool = WebSearch(WebSearchSettings(providers=["brave", "searxng"], brave_api_key=BRAVE_KEY,
                                           brave_url=brave.base_url, searxng_url=searx.base_url))
        registry, ctx = registry_with(tool, tmp_path)
        out = await search(registry, ctx, query="films")
        assert out.content.startswith("web_search (searxng)") and len(brave.requests) == 1
        searx.fail_with = (500, None, {})
        failed = await search(registry, ctx, query="other films")
    assert failed.is_error
    first = failed.content.splitlines()[0]
    assert first == ("error: web search failed: brave: rate limit or quota reached (HTTP 429 (Request rate limit "
                     "exceeded)), retry after 1s; searxng: HTTP 500")


async def test_quota_and_refused_keys_are_named_without_the_key(tmp_path: Path) -> None:
    with fake_search("tavily") as tavily, fake_search("brave") as brave:
        tavily.fail_with = (432, {"detail": {"error": "This request exceeds your plan's set usage limit."}}, {})
        tool = WebSearch(WebSearchSettings(providers=["tavily", "brave"], tavily_api_key=TAVILY_KEY,
                                           tavily_url=tavily.base_url, brave_api_key="wrong-key", brave_url=brave.base_url))
        registry, ctx = registry_with(tool, tmp_path)
        out = await search(registry, ctx, query="films")
    assert "tavily: the plan credit limit is reached (HTTP 432)" in out.content
    assert "brave: the API key was refused (HTTP 422 (The provided subscription token is invalid.))" in out.content
    assert TAVILY_KEY not in out.content and "wrong-key" not in out.content


async def test_the_same_search_in_one_run_is_asked_once(tmp_path: Path) -> None:
    with fake_search("searxng") as searx:
        tool = WebSearch(WebSearchSettings(providers=["searxng"], searxng_url=searx.base_url))
        registry, ctx = registry_with(tool, tmp_path)
        first = await search(registry, ctx, query="films")
        again = await search(registry, ctx, query="films")
        assert len(searx.requests) == 1 and "(again, from this run)" in again.content
        assert first.content.splitlines()[2:8] == again.content.splitlines()[2:8]  # the same results, newly wrapped
        ctx.run_id = "r2"
        await search(registry, ctx, query="films")
        assert len(searx.requests) == 2  # another run asks again: results change


class FakeDDGS:
    """The `ddgs.DDGS` surface the provider uses: constructed with a timeout, `.text(query, **filters)`."""

    calls: list[tuple[int, str, dict[str, Any]]] = []
    raise_next: BaseException | None = None

    def __init__(self, timeout: int) -> None:
        self.timeout = timeout

    def text(self, query: str, **kwargs: Any) -> list[dict[str, str]]:
        FakeDDGS.calls.append((self.timeout, query, kwargs))
        if FakeDDGS.raise_next is not None:
            raise FakeDDGS.raise_next
        return [{"title": "DDG hit", "href": "https://ddg.example/a", "body": "snippet"},
                {"title": "bad", "href": "file:///etc/passwd", "body": "dropped"}]


async def test_duckduckgo_needs_no_configuration(tmp_path: Path) -> None:
    from ddgs.ddgs import DDGS
    from ddgs.exceptions import DDGSException, RatelimitException

    assert WebSearchSettings().providers == ["duckduckgo"]
    assert isinstance(DuckDuckGoSearch(10)._make(), DDGS)  # the real library is what the default builds
    FakeDDGS.calls.clear()
    tool = WebSearch(WebSearchSettings(timeout_seconds=7), ddgs_client=FakeDDGS)
    registry, ctx = registry_with(tool, tmp_path)
    out = await search(registry, ctx, query="films", count=3, freshness="year", site="ddg.example")
    assert FakeDDGS.calls == [(7, "films site:ddg.example", {"max_results": 3, "backend": "duckduckgo", "timelimit": "y"})]
    assert "1. DDG hit\n   https://ddg.example/a\n   snippet" in out.content and "file:" not in out.content
    FakeDDGS.raise_next = RatelimitException("https://html.duckduckgo.com/html 202 Ratelimit")
    limited = await search(registry, ctx, query="other")
    assert limited.content.splitlines()[0] == ("error: web search failed: duckduckgo: rate limited (too many searches "
                                               "from this address); try later")
    FakeDDGS.raise_next = DDGSException("No results found.")
    empty = await search(registry, ctx, query="nothing")
    FakeDDGS.raise_next = None
    assert not empty.is_error and "0 result(s)" in empty.content and "No results" in empty.content


@pytest.mark.parametrize("site", ["http://x.example", "x.example/path", "localhost", "a b.example"])
async def test_site_must_be_a_domain(tmp_path: Path, site: str) -> None:
    registry, ctx = registry_with(WebSearch(WebSearchSettings(), chain=[]), tmp_path)
    out = await search(registry, ctx, query="films", site=site)
    assert out.status == "invalid_args" and "site" in out.content


def test_a_provider_without_its_key_is_a_config_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[tools.web_search]\nproviders = ["brave", "duckduckgo"]\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(Paths(home), {})
    assert str(caught.value) == ("config error: tools.web_search.providers names brave but tools.web_search.brave_api_key "
                                 "is not set; set it (or export BRAVE_API_KEY) or remove brave from providers")
    settings = load_settings(Paths(home), {"BRAVE_API_KEY": "from-env"})
    assert settings.tools.web_search.brave_api_key == "from-env"
