"""Which addresses `web_fetch` may reach on its own, and how a URL's host becomes addresses.

A fetch reaches the public web only. Loopback, link-local, private (RFC 1918, CGNAT
100.64/10, ULA fc00::/7), unspecified, multicast, reserved and cloud-metadata addresses are
"private" here: reaching them needs the owner's approval, because a page or a prompt could
otherwise make the agent read this machine's services or the cloud's instance credentials.

The check is on addresses, after resolution, so a public-looking name that resolves to
127.0.0.1 counts as private. IPv4 written the ways inet_aton accepts (2130706433, 0x7f.1,
0177.0.0.1, 127.1) and IPv4 carried inside IPv6 (::ffff:a.b.c.d, ::a.b.c.d, NAT64
64:ff9b::/96, 6to4 2002::/16, Teredo) are unwrapped before the check.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import re
import socket
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

if TYPE_CHECKING:  # imported on first use: not at the daemon's start-up
    import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> the addresses to connect to, as strings. Injected in tests.
Resolver = Callable[[str, int], Awaitable[list[str]]]

# Names that mean "this machine or the cloud's metadata service" whatever DNS says.
PRIVATE_NAMES = {"localhost", "metadata", "metadata.google.internal", "metadata.goog", "instance-data",
                 "instance-data.ec2.internal", "metadata.azure.internal"}
PRIVATE_SUFFIXES = (".localhost", ".internal", ".local", ".home.arpa")
METADATA = {ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean…
    "169.254.170.2",  # AWS ECS task credentials
    "fd00:ec2::254",  # AWS over IPv6
    "100.100.100.200",  # Alibaba Cloud
    "168.63.129.16",  # Azure wire server (a public-range address)
    "192.0.0.192",  # Oracle Cloud
)}
NAT64 = ipaddress.ip_network("64:ff9b::/96")
CGNAT = ipaddress.ip_network("100.64.0.0/10")
_AT_PART = re.compile(r"^(0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*)$", re.IGNORECASE)


@dataclass
class Target:
    """One URL's host, checked: where to connect and whether it is private (and why)."""

    url: httpx.URL
    host: str  # ASCII (IDNA) host without brackets, as sent in the Host header
    port: int
    addresses: list[str]
    private: str | None = None  # why it is not the public web, or None
    literal: bool = False  # the host is an IP address written in the URL


class FetchProblem(Exception):
    """A URL that cannot be fetched at all (bad form, unknown host): the message says why."""


def inet_aton_ip(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a C library would read from `host` (1-4 parts, decimal/octal/hex)."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_AT_PART.match(p) for p in parts):
        return None
    try:
        values = [int(p, 16) if p.lower().startswith("0x") and len(p) > 2 else int(p, 8) if p.startswith("0") else int(p)
                  for p in parts]
    except ValueError:
        return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(parts)):
        return None
    number = 0
    for v in head:
        number = number << 8 | v
    number = number << 8 * (5 - len(parts)) | last
    return ipaddress.IPv4Address(number)


def literal_ip(host: str) -> IPAddress | None:
    """`host` as an IP address when it is one in any accepted spelling, else None."""
    host = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return inet_aton_ip(host)


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped:
        return ip.ipv4_mapped
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour:
        return ip.sixtofour
    if ip.teredo:
        return ip.teredo[1]
    if int(ip) >> 32 == 0 and int(ip) > 1:  # IPv4-compatible ::a.b.c.d (deprecated, still routed by some stacks)
        return ipaddress.IPv4Address(int(ip))
    return None


def private_reason(address: str | IPAddress) -> str | None:
    """Why `address` is not a public-web address, or None when it is one."""
    try:
        ip = address if not isinstance(address, str) else ipaddress.ip_address(address)
    except ValueError:
        return f"{address} is not an address web_fetch understands"
    shown = str(ip)
    if isinstance(ip, ipaddress.IPv6Address) and (inner := _embedded_v4(ip)) is not None:
        reason = private_reason(inner)
        return f"{shown} carries {reason}" if reason else None
    if ip in METADATA:
        return f"{shown} is a cloud metadata address"
    for test, what in ((ip.is_loopback, "a loopback address (this machine)"),
                       (ip.is_unspecified, "the unspecified address (this machine)"),
                       (ip.is_link_local, "a link-local address"),
                       (ip.is_multicast, "a multicast address"),
                       (ip in CGNAT if isinstance(ip, ipaddress.IPv4Address) else False, "a shared (CGNAT) address"),
                       (ip.is_private, "a private-network address")):
        if test:
            return f"{shown} is {what}"
    if not ip.is_global:
        return f"{shown} is a reserved, non-public address"
    return None


def private_name(host: str) -> str | None:
    name = host.lower().rstrip(".")
    if name in PRIVATE_NAMES or name.endswith(PRIVATE_SUFFIXES):
        return f"{host} names this machine, the local network or a cloud metadata service"
    return None


async def system_resolve(host: str, port: int) -> list[str]:
    """The system resolver (in a worker thread via the event loop), addresses deduplicated in order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in seen:
            seen.append(address)
    return seen


async def check_url(raw: str | httpx.URL, resolve: Resolver, timeout: float = 10.0) -> Target:
    """Parse, resolve and classify one URL. Raises FetchProblem when it cannot be fetched."""
    # httpx (5 MB resident) is imported by the first fetch, in a thread so the event loop never waits on it.
    httpx = sys.modules.get("httpx") or await asyncio.to_thread(importlib.import_module, "httpx")

    try:
        url = raw if isinstance(raw, httpx.URL) else httpx.URL(raw)
    except (httpx.InvalidURL, ValueError) as exc:
        raise FetchProblem(f"{raw} is not a valid URL ({exc})") from None
    if url.scheme not in ("http", "https") or not url.raw_host:
        raise FetchProblem(f"{raw} is not an absolute http(s) URL")
    host = url.raw_host.decode("ascii")
    port = url.port or (443 if url.scheme == "https" else 80)
    ip = literal_ip(host)
    if ip is not None:
        return Target(url, host, port, [str(ip)], private_reason(ip), literal=True)
    try:
        addresses = await asyncio.wait_for(resolve(host.rstrip("."), port), timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        raise FetchProblem(f"could not resolve {host}: {type(exc).__name__}: {exc}") from None
    if not addresses:
        raise FetchProblem(f"could not resolve {host}: no addresses")
    reasons = [r for a in addresses if (r := private_reason(a))]
    why = private_name(host) or (f"{host} resolves to {reasons[0]}" if reasons else None)
    return Target(url, host, port, list(addresses), why)
