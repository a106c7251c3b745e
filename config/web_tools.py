"""Settings of the agent's reach into the web beyond web_fetch: `[tools.web_search]` and `[tools.browser]`.

Kept beside schema.py (like mcp.py) so the search providers and the browser have their knobs in one place.
Every address here is written by the owner: that is why a SearXNG instance on the local network is
used without asking (the owner chose it), while pages the agent opens are checked on every request.
"""

# No `from __future__ import annotations` here: pydantic would compile every field's annotation text at each start.

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SearchProvider = Literal["brave", "tavily", "searxng", "duckduckgo"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class WebSearchSettings(_Section):
    """`web_search`: which providers answer, tried in order (the next one when one fails or is out of quota)."""

    providers: list[SearchProvider] = Field(default_factory=lambda: ["duckduckgo"], min_length=1, description=(
        "providers tried in this order; duckduckgo needs no key (the `ddgs` library)"))
    brave_api_key: str | None = Field(None, description="Brave Search API subscription token (normally BRAVE_API_KEY)")
    brave_url: str = Field("https://api.search.brave.com", pattern=r"^https?://",
                           description="Brave Search API base address (a proxy, or a test server)")
    tavily_api_key: str | None = Field(None, description="Tavily API key, tvly-… (normally TAVILY_API_KEY)")
    tavily_url: str = Field("https://api.tavily.com", pattern=r"^https?://", description="Tavily API base address")
    searxng_url: str | None = Field(None, pattern=r"^https?://", description=(
        "your SearXNG instance, e.g. http://192.168.1.5:8080 (JSON format enabled in its settings.yml)"))
    default_count: int = Field(5, ge=1, le=20, description="results when the call names no count")
    timeout_seconds: float = Field(15.0, gt=0, le=120)

    def missing(self) -> str | None:
        """What a provider in the chain lacks (checked after the environment's keys are in), or None."""
        needs = {"brave": self.brave_api_key, "tavily": self.tavily_api_key, "searxng": self.searxng_url}
        for name in self.providers:
            if name in needs and not needs[name]:
                key = "searxng_url" if name == "searxng" else f"{name}_api_key"
                also = "" if name == "searxng" else f" (or export {name.upper()}_API_KEY)"
                return (f"config error: tools.web_search.providers names {name} but tools.web_search.{key} is not "
                        f"set; set it{also} or remove {name} from providers")
        return None


class BrowserSettings(_Section):
    """`browser`: the system Chromium driven through Playwright (the `browser` extra), one process per daemon."""

    enabled: bool = Field(True, description="offer the browser tool (it starts Chromium only on first use)")
    executable: str | None = Field(None, description="the Chromium binary; default: `chromium` on PATH (never a download)")
    idle_context_seconds: float = Field(600.0, ge=5, description="a person's browser context unused this long is closed")
    max_pages: int = Field(6, ge=1, le=50, description="open tabs per person; a page opening more is closed at once")
    navigation_timeout_seconds: float = Field(30.0, gt=0, le=300, description="a page still loading after this is reported")
    action_timeout_seconds: float = Field(10.0, gt=0, le=120, description="click, type, wait … give up after this")
    snapshot_chars: int = Field(24_000, ge=1000, le=200_000, description="longest page snapshot handed to the model")
    download_max_bytes: int = Field(50 * 1024 * 1024, ge=1024, description="a bigger download is deleted, not kept")
    keep_logins: bool = Field(False, description=(
        "keep each person's cookies and site storage under state/browser/ (0600), so logins survive a closed "
        "context and a restart; off: every context starts empty"))
    allow_javascript: bool = Field(False, description="allow the `evaluate` action (run the model's JavaScript in the page)")
    allowed_private_hosts: list[str] = Field(default_factory=list, description=(
        "host names or addresses on this machine or the local network the browser may open without asking "
        "(e.g. \"192.168.1.1\", \"nas.local\"), in the owner's browser only; anything else private needs approval"))
