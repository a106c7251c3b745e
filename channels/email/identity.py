"""Who sent a mail, for real: the From address read strictly, and the receiving server's DMARC verdict.

Why strict: the From header decides who the agent works for (owner, allowed sender) and who may
approve a risky tool call. A lenient reader and the receiving server's DMARC check can disagree
about which address a header names — `owner@example.org <attacker@evil.example>` is the angle
address to RFC 5322 and to DMARC, the first word to a forgiving parser — and every disagreement is
a forgery. So a From with any parse defect, more than one From header or address, a group, or a
display name that is itself another address names nobody, and its mail is never answered.

Why only the topmost Authentication-Results header of the configured server, parsed by `authres`
(RFC 8601) from the header's raw text: the receiving server prepends its header above everything
the sender wrote, so the topmost one with its authserv-id is the server's own; copies lower down
are the sender's words. Matching `dmarc=pass` in the text would also match a comment the server
copied from the sender's envelope, and decoding the header first would turn an encoded-word in such
a comment into real results. A DMARC pass counts only for the domain of the From address read here.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import default as default_policy

import authres
import authres.dmarc  # noqa: F401  (registers the dmarc method's properties with the parser)
from authres.core import AuthResError
import idna

# Obsolete RFC 5322 syntax that mail clients still write and that cannot hide another address.
_HARMLESS_DEFECTS = {"period in 'phrase'"}
_ADDRESS_IN_TEXT = re.compile(r"[^\s@<>\"'(),;:]+@[^\s@<>\"'(),;:]+")
_FOLD = re.compile(r"\r?\n(?=[ \t])")
_AUTHRES = authres.all_features()


@dataclass(frozen=True)
class FromAddress:
    """The one address a From header names (canonical: see `canonical_address`), or why there is none."""

    address: str
    display: str
    problem: str | None = None  # set: the header names nobody for sure; `address` is only for the log


def canonical_domain(domain: str) -> str | None:
    """The domain as DNS and DMARC compare it: lower case, IDNA A-labels (`exämple.test` ->
    `xn--exmple-cua.test`); None when it is no valid host name."""
    domain = domain.strip().rstrip(".")
    if not domain or domain.startswith("["):  # an address literal has no DMARC domain
        return None
    try:
        return idna.encode(domain, uts46=True).decode("ascii").lower()
    except idna.IDNAError:
        return None


def canonical_address(address: str) -> str:
    """`Local@Domain` as the access lists spell it: local part lower case (providers treat it so),
    domain as `canonical_domain`. An address that does not parse is only lower-cased."""
    local, at, domain = address.strip().rpartition("@")
    ascii_domain = canonical_domain(domain) if at and local else None
    if ascii_domain is None:
        return address.strip().lower()
    return f"{unicodedata.normalize('NFC', local).lower()}@{ascii_domain}"


def _raw_values(msg: EmailMessage, name: str) -> list[str]:
    """Every `name` header's text as it arrived (unfolded, encoded-words not decoded, 8-bit read as UTF-8),
    topmost first; a value that is not UTF-8 comes back with replacement characters."""
    values = []
    for key, value in msg.raw_items():
        if key.lower() == name.lower():
            text = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if isinstance(value, str) else ""
            values.append(_FOLD.sub("", text).strip())
    return values


def read_from(msg: EmailMessage) -> FromAddress:
    """The From address, read as RFC 5322 (and DMARC) read it, with the reason when it names nobody."""
    values = _raw_values(msg, "From")
    if len(values) != 1:
        return FromAddress("", "", f"{len(values)} From headers" if values else "no From header")
    try:
        header = default_policy.header_factory("From", values[0])
        addresses: tuple[Address, ...] = header.addresses  # type: ignore[attr-defined]
    except ValueError as exc:  # e.g. an encoded-word display name that decodes to CR/LF
        return FromAddress("", "", f"the From header {values[0]!r} cannot be read ({exc})")
    defects = [str(d) for d in header.defects if str(d) not in _HARMLESS_DEFECTS]
    first = addresses[0].addr_spec if addresses else values[0]
    if "\ufffd" in values[0]:
        return FromAddress(first, "", "the From header is not valid UTF-8")
    if defects:
        return FromAddress(first, "", f"the From header {values[0]!r} does not parse cleanly ({defects[0]})")
    groups = header.groups  # type: ignore[attr-defined]
    if len(addresses) != 1 or len(groups) != 1 or groups[0].display_name is not None:
        return FromAddress(first, "", f"the From header {values[0]!r} names {len(addresses)} addresses, not one")
    only = addresses[0]
    if not only.username or canonical_domain(only.domain) is None:
        return FromAddress(first, "", f"the From address {only.addr_spec!r} has no valid domain")
    address = canonical_address(only.addr_spec)
    display = clean_header_text(only.display_name)
    for named in _ADDRESS_IN_TEXT.findall(only.display_name):
        if canonical_address(named) != address:
            return FromAddress(address, display, f"the From display name {only.display_name!r} is another address "
                                                 f"than the one it names ({address})")
    return FromAddress(address, display)


def dmarc_problem(msg: EmailMessage, authserv_id: str, from_domain: str) -> str | None:
    """None when the topmost Authentication-Results header of `authserv_id` reports DMARC pass for
    `from_domain` (the From address's domain); else what is missing, for the log."""
    wanted = authserv_id.strip().lower()
    for value in _raw_values(msg, "Authentication-Results"):
        try:
            parsed = _AUTHRES.parse_value(value)
        except (AuthResError, ValueError) as exc:
            # it may be the server's own header made unreadable by what the sender wrote: stop here
            return f"an Authentication-Results header above {authserv_id}'s cannot be read ({exc})"
        if str(parsed.authserv_id).strip().lower() != wanted:
            continue
        dmarc = [r for r in parsed.results if str(r.method).lower() == "dmarc"]
        if not dmarc:
            return f"{authserv_id}'s Authentication-Results has no DMARC result"
        for result in dmarc:
            said = str(result.result).lower()
            domain = canonical_domain(str(getattr(result, "header_from", None) or ""))
            if said != "pass":
                return f"{authserv_id} says dmarc={said}"
            if domain != from_domain:
                return f"{authserv_id}'s dmarc=pass is for {domain or 'no domain'}, not the From domain {from_domain}"
        return None
    return f"no Authentication-Results header from {authserv_id}"


_UNSAFE = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")


def clean_header_text(text: str) -> str:
    """Text from an incoming mail made safe to put in a header of ours: control characters (CR, LF,
    tabs, NUL, Unicode line separators) become one space; runs of spaces collapse."""
    return " ".join(_UNSAFE.sub(" ", text).split())


__all__ = ["FromAddress", "canonical_address", "canonical_domain", "clean_header_text", "dmarc_problem", "read_from"]
