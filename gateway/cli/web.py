"""`clawgate web [--json] [--show-token]`: where the web control page is and the token to log in with,
so nobody digs in config.toml or state/gateway.token.

The page asks for the token in its login field and keeps it out of URLs (docs/web.md), so the
token is printed beside the address, not inside it. It is a secret: printed only when stdout is a
terminal (the person who asked), or with --show-token; never logged. Whoever can run this on the
home can already read the token's file (0600), so it reveals nothing new to them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .errors import EXIT_FAILED, CliError
from .output import JSON_HELP, print_json


def cmd_web(args: argparse.Namespace) -> int:
    from clawgate.config.loader import load
    from clawgate.config.token import gateway_token

    from ..instance import holder_pid
    from ..web import page_url

    paths, settings = load()
    url = page_url(settings.gateway.host, settings.gateway.port)
    token = gateway_token(paths, settings)
    if token is None:
        raise CliError(f"no gateway token yet: start the gateway once (`clawgate gateway`); it writes "
                       f"{paths.gateway_token_file} (or set gateway.token)", EXIT_FAILED)
    running = holder_pid(paths) is not None
    show = args.show_token or sys.stdout.isatty()
    if args.json:
        print_json({"url": url, "running": running, **({"token": token} if show else {})})
        return 0
    print(f"web page:  {url}" + ("" if running else "   (no gateway runs on this home: start it with `clawgate gateway`)"))
    if show:
        print(f"token:     {token}")
        print("open the page and paste the token into its field; keep the token private (it is the owner's key)")
    else:
        print("token:     not printed: the output is not a terminal (add --show-token to print it anyway)")
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("web", help="print the web page's address and the token to log in with")
    p.add_argument("--show-token", action="store_true",
                   help="print the token even when the output is not a terminal (a pipe, a file)")
    p.add_argument("--json", action="store_true", help=JSON_HELP + "; the token only as for the text")
    p.set_defaults(fn=cmd_web)
