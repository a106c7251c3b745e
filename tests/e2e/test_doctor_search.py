"""`clawgate doctor` and web_search: each configured provider asked once, its failure in one line."""

from __future__ import annotations

import json

from tests.e2e.test_doctor import home, run_doctor  # noqa: F401  (the fixture: an initialised home)
from tests.fakes.search_api import BRAVE_KEY, fake_search
from tests.harness import DaemonProcess


def test_doctor_checks_each_configured_provider(home: DaemonProcess) -> None:  # noqa: F811
    with fake_search("brave") as brave, fake_search("searxng") as searx:
        searx.fail_with = (403, None, {})  # an instance whose settings.yml lacks the json format
        env = {"CLAWGATE_TOOLS__WEB_SEARCH__PROVIDERS": json.dumps(["brave", "searxng", "duckduckgo"]),
               "CLAWGATE_TOOLS__WEB_SEARCH__BRAVE_URL": brave.base_url, "BRAVE_API_KEY": BRAVE_KEY,
               "CLAWGATE_TOOLS__WEB_SEARCH__SEARXNG_URL": searx.base_url}
        code, checks, raw = run_doctor(home, env=env)
        assert len(brave.requests) == 1 and brave.requests[0].params["count"] == "1"
        offline_code, offline, _ = run_doctor(home, "--offline", env=env)
        assert len(brave.requests) == 1  # --offline contacts nobody
    assert code == 1, raw
    assert checks["search brave"] == {"name": "search brave", "status": "ok", "detail": "answered a test search", "fix": ""}
    assert checks["search searxng"]["status"] == "fail" and "add json to search.formats" in checks["search searxng"]["detail"]
    assert checks["search duckduckgo"]["status"] == "ok" and BRAVE_KEY not in raw
    assert offline["search brave"]["status"] == "skip" and offline["search searxng"]["status"] == "skip"


def test_the_keyless_default_adds_no_line(home: DaemonProcess) -> None:  # noqa: F811
    _, checks, _ = run_doctor(home, "--offline")
    assert not any(name.startswith("search") for name in checks)


def test_a_provider_without_its_key_fails_the_config_in_one_line(home: DaemonProcess) -> None:  # noqa: F811
    code, checks, _ = run_doctor(home, "--offline", env={"CLAWGATE_TOOLS__WEB_SEARCH__PROVIDERS": '["tavily"]'})
    assert code == 1 and checks["config"]["status"] == "fail"
    assert "tools.web_search.tavily_api_key is not set" in checks["config"]["detail"]
