"""The control page's status lists each webhook with its last calls (headless Chromium, the real daemon)."""

from __future__ import annotations

import httpx

from tests.e2e.test_web_e2e import browser, expect, logged_in  # noqa: F401  (fixture)
from tests.hooks_support import TOKEN, hook_url, hooks_daemon  # noqa: F401  (fixture)

CI = f'[hooks.ci]\ntoken = "{TOKEN}"\ndeliver = "gateway:main"\nburst = 1\nrate_per_minute = 1\n'


def test_the_status_shows_each_hook_with_its_last_calls(browser, hooks_daemon, fake_model) -> None:
    daemon = hooks_daemon(CI)
    sent = [httpx.post(hook_url(daemon, "ci"), json={"n": n}, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
            for n in range(2)]
    assert [r.status_code for r in sent] == [202, 429]
    page = logged_in(browser, daemon)
    row = page.locator("#status dt", has_text="hook ci").locator("xpath=following-sibling::dd[1]")
    expect(row).to_contain_text("bearer token → gateway:main; last calls: 429 at ")
    expect(row).to_contain_text("(rate limited), 202 at ")
    assert TOKEN not in page.content()
    assert not page.errors, page.errors  # type: ignore[attr-defined]
