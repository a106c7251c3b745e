"""`web_fetch`: fetch a URL from the public web and hand the text to the model as untrusted data.

How a fetch stays on the public web (rules in agent/tools/netpolicy.py):

1. `needs_approval` parses the URL, resolves its host once and classifies every address.
   A private target (loopback, private network, metadata service…) returns a reason, so the
   registry asks the owner; the checked target is pinned on the call's arguments.
2. `run` connects to exactly the pinned addresses: the request URL carries the IP, the Host
   header carries the name, and for HTTPS the `sni_hostname` extension makes TLS send and
   verify the name. There is no second lookup between check and connect, so DNS rebinding
   cannot swap in another address. Proxies from the environment are not used (a proxy would
   resolve the name itself).
3. Redirects are followed here, at most `max_redirects`, each hop checked the same way. A hop
   to a private address is refused, unless it goes back to the very host the owner approved
   (then the approved addresses are reused, not looked up again).

`transport` and `resolve` are injectable so tests run without the network.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import Field, PrivateAttr

from ..trust.untrusted import escape_source, wrap_untrusted
from .base import Args, Tool, ToolContext, ToolError

if TYPE_CHECKING:  # imported when a fetch runs (the daemon warms it after start-up): not at start-up
    import httpx
from .netpolicy import FetchProblem, Resolver, Target, check_url, system_resolve

__all__ = ["WebFetch", "html_to_text", "wrap_untrusted"]

_DROP = re.compile(r"<(script|style|noscript)\b.*?</\1\s*>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"[ \t]+")
_LINES = re.compile(r"\n\s*\n+")
REDIRECTS = (301, 302, 303, 307, 308)


def _host_of(args: "WebFetch.Arguments") -> str | None:
    """The URL's host, lower-case; None when the URL cannot be parsed (run reports that)."""
    from urllib.parse import urlsplit

    try:
        host = urlsplit(args.url).hostname
    except ValueError:
        return None
    return host.rstrip(".").lower() if host else None


def html_to_text(page: str) -> str:
    text = _TAG.sub(" ", _DROP.sub(" ", page))
    from html import unescape  # its entity table is ~2,200 names: built at the first page, not at start

    text = unescape(text)
    return _LINES.sub("\n\n", _SPACE.sub(" ", text)).strip()


class WebFetch(Tool):
    name = "web_fetch"
    description = (
        "Fetch a page or file over HTTP(S) as text (HTML reduced to text; untrusted data). "
        "Local or private addresses need the user's approval."
    )
    # A request reaches another machine: after a crash mid-fetch it is reported, not silently repeated.
    recovery = "unknown"

    class Arguments(Args):
        url: str = Field(pattern=r"^https?://")
        # The target checked by needs_approval; run connects to it (not part of the schema).
        _target: Target | None = PrivateAttr(default=None)

    def __init__(self, cap_bytes: int = 100_000, timeout: float = 20.0, transport: httpx.AsyncBaseTransport | None = None,
                 resolve: Resolver | None = None, max_redirects: int = 5) -> None:
        self.cap = cap_bytes
        self.timeout = timeout
        self.transport = transport
        self.resolve = resolve or system_resolve
        self.max_redirects = max_redirects

    async def needs_approval(self, args: Arguments, ctx: ToolContext) -> str | None:  # type: ignore[override]
        """A reason when the URL's host is, or resolves to, a private address; pins the target."""
        try:
            target = await check_url(args.url, self.resolve, self.timeout)
        except FetchProblem:
            return None  # run reports the problem
        args._target = target
        if target.private is None:
            return None
        return (f"web_fetch of {escape_source(str(target.url))} reaches a non-public address: {target.private}. "
                "Approve only if you want the agent to read that service")

    def lasting_effect(self, args: Arguments, ctx: ToolContext) -> str | None:
        """A request to a host this run has not asked yet can carry data out in its URL."""
        host = _host_of(args)
        if host is None or host in ctx.taint.hosts:
            return None
        return f"sends a request to {escape_source(host)}, a host this run has not contacted (its URL can carry data out)"

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        import httpx

        if (host := _host_of(args)) is not None:
            ctx.taint.hosts.add(host)

        # A pinned private target got here only through the owner's approval (the registry runs a
        # call whose needs_approval gave a reason only once it is approved). Without a pin (a call
        # not made through the registry) the target is checked here and a private one is refused.
        first = args._target or await self._check(args.url)
        if first.private and args._target is None:
            raise ToolError(f"{args.url} is not on the public web: {first.private}",
                            "ask the user; only an approved call may fetch private addresses")
        approved = first if first.private else None
        try:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False, transport=self.transport,
                                         trust_env=False, headers={"user-agent": "clawgate/0.1"}) as client:
                return await self._fetch(client, first, approved)
        except httpx.HTTPError as exc:
            raise ToolError(f"could not fetch {escape_source(args.url)}: {type(exc).__name__}: {exc}",
                            "check the URL; retry later if it is a network error") from None

    async def _check(self, url: str | httpx.URL) -> Target:
        try:
            return await check_url(url, self.resolve, self.timeout)
        except FetchProblem as exc:
            raise ToolError(str(exc), "check the URL (scheme, host name, spelling)") from None

    async def _fetch(self, client: httpx.AsyncClient, target: Target, approved: Target | None) -> str:
        import httpx

        hops: list[str] = []
        while True:
            response = await self._send(client, target)
            location = response.headers.get("location")
            if response.status_code not in REDIRECTS or not location:
                break
            await response.aclose()
            if len(hops) >= self.max_redirects:
                raise ToolError(f"{hops[0]} redirected more than {self.max_redirects} times",
                                "fetch the final address directly, or give up on this page")
            hops.append(str(target.url))
            try:
                following = target.url.join(location)
            except (httpx.InvalidURL, ValueError):
                raise ToolError(f"{escape_source(str(target.url))} redirected to an invalid URL",
                                "fetch another page") from None
            target = await self._next_hop(target, following, approved)
        try:
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self.cap:
                    break
        finally:
            await response.aclose()
        truncated = len(body) > self.cap
        text = body[: self.cap].decode(response.encoding or "utf-8", errors="replace")
        if "html" in response.headers.get("content-type", ""):
            text = html_to_text(text)
        url = str(target.url)
        header = f"HTTP {response.status_code} {escape_source(url)}" + (" (truncated)" if truncated else "")
        if hops:
            header += f" (redirected from {escape_source(hops[0])})"
        return header + "\n" + wrap_untrusted(url, text)

    async def _next_hop(self, current: Target, following: httpx.URL, approved: Target | None) -> Target:
        """Check a redirect target; a private one is refused unless it is the approved host itself."""
        if following.scheme not in ("http", "https"):
            raise ToolError(f"{escape_source(str(current.url))} redirected to a non-http(s) URL",
                            "fetch another page")
        if approved and following.raw_host.decode("ascii") == approved.host and \
                (following.port or (443 if following.scheme == "https" else 80)) == approved.port:
            return Target(following, approved.host, approved.port, approved.addresses, approved.private,
                          approved.literal)
        target = await self._check(following)
        if target.private:
            raise ToolError(f"refused the redirect from {escape_source(str(current.url))} to "
                            f"{escape_source(str(following))}: {target.private}",
                            "web_fetch follows redirects only to public addresses; if the user trusts that "
                            "address, fetch it directly so they can approve it")
        return target

    async def _send(self, client: httpx.AsyncClient, target: Target) -> httpx.Response:
        """GET the target at its checked addresses (in order), never at a fresh lookup of its name."""
        import httpx

        headers = {"host": target.url.netloc.decode("ascii")}
        extensions: dict[str, Any] = {}
        if target.url.scheme == "https" and not target.literal:
            extensions["sni_hostname"] = target.host.rstrip(".")
        error: httpx.HTTPError | None = None
        for address in target.addresses:
            request = client.build_request("GET", target.url.copy_with(host=address), headers=headers,
                                           extensions=extensions)
            try:
                return await client.send(request, stream=True)
            except httpx.ConnectError as exc:
                error = exc  # try the next checked address
        assert error is not None
        raise error
