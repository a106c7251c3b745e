"""The web chat renders the model's answers as sanitised Markdown, with copy buttons on code and
the run's tool calls as collapsible steps, live and after a reload; in headless Chromium against
the real daemon and the fake Messages API (same browser set-up as tests/e2e/test_web_e2e.py).
"""

from __future__ import annotations

import re
import threading

from tests.fakes.anthropic_api import text, tool_uses
from tests.e2e.test_web_e2e import browser, expect, logged_in, screenshot  # noqa: F401 (browser: fixture)
from tests.waiting import wait_until

CODE = 'def greet(name):\n    return f"hello {name} <b>&amp;</b>"'
ANSWER = f"""**Bold start** of a longer answer, so the first streamed part holds it whole.

| tool | calls |
|---|---:|
| exec | 3 |
| write_file | 1<br>2 |

```python
{CODE}
```

<img src=x onerror="window.__pwned = 'img'"> and <svg onload="window.__pwned = 'svg'"></svg> and <kbd>Ctrl</kbd>+<kbd>C</kbd>,
[a script link](javascript:window.__pwned='link'), ![a script image](javascript:window.__pwned='image'),
[ok](https://example.org/docs) and `inline code`.

<div class="msg user" style="color:red">dressed up</div>"""

# Is anything in the message log able to run script, or dressed as page UI?
HOSTILE_DOM = """() => {
  const log = document.querySelector('#messages');
  const handlers = [...log.querySelectorAll('*')].flatMap((n) => [...n.attributes].map((a) => a.name))
    .filter((name) => name.startsWith('on'));
  return {handlers, imgs: log.querySelectorAll('img, svg, input, style').length,
          scriptLinks: [...log.querySelectorAll('a')].filter((a) => /^\\s*javascript:/i.test(a.getAttribute('href') || '')).length,
          styled: log.querySelectorAll('[style]').length, fakeUser: log.querySelectorAll('.msg .msg').length,
          pwned: window.__pwned ?? null};
}"""


def _check_rendered(answer) -> None:
    table = answer.locator("table")
    expect(table.locator("th")).to_have_text(["tool", "calls"])
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table.locator("tbody tr").nth(1).locator("td")).to_have_text(["write_file", "12"])
    expect(table.locator("tbody tr").nth(1).locator("td br")).to_have_count(1)  # a plain tag is kept
    block = answer.locator(".code-block")
    expect(block).to_have_attribute("data-lang", "python")
    assert block.locator("pre code").text_content() == CODE + "\n"  # the < and & shown as typed
    expect(block.locator("button.copy")).to_be_visible()
    expect(answer.locator("strong").first).to_have_text("Bold start")
    expect(answer.locator("code:not(pre code)")).to_have_text("inline code")
    expect(answer.locator("kbd")).to_have_text(["Ctrl", "C"])
    expect(answer.locator("a[href='https://example.org/docs']")).to_have_attribute("rel", "noopener noreferrer")
    # HTML with attributes is shown as the model wrote it, never parsed into the page
    expect(answer).to_contain_text("""<img src=x onerror="window.__pwned = 'img'">""")
    expect(answer).to_contain_text("""<div class="msg user" style="color:red">dressed up</div>""")
    # the Markdown links to javascript: keep their words and lose their target
    for words in ("a script link", "a script image"):
        expect(answer.locator("a", has_text=words)).not_to_have_attribute("href", re.compile("."))


def test_an_answer_renders_as_markdown_and_hostile_html_is_neutralised(browser, daemon, fake_model):
    browser.grant_permissions(["clipboard-read", "clipboard-write"], origin=f"http://127.0.0.1:{daemon.port}")
    gate = threading.Event()
    fake_model.enqueue(text(ANSWER, hold=gate))
    page = logged_in(browser, daemon)
    page.fill("#chat-input", "show me a table and some code")
    page.keyboard.press("Enter")
    # Rendered while it streams: the first part's bold is already bold.
    expect(page.locator("#messages .msg.assistant.streaming strong")).to_have_text("Bold start")
    gate.set()
    answer = page.locator("#messages .msg.assistant[data-state=final]")
    expect(answer).to_have_count(1)
    expect(answer.locator(".code-block")).to_have_count(1)
    assert page.evaluate(HOSTILE_DOM) == {"handlers": [], "imgs": 0, "scriptLinks": 0, "styled": 0, "fakeUser": 0,
                                          "pwned": None}
    _check_rendered(answer)
    screenshot(page, "markdown")

    answer.locator(".code-block button.copy").click()
    expect(answer.locator(".code-block button.copy")).to_have_attribute("data-copied", "true")
    wait_until(lambda: page.evaluate("navigator.clipboard.readText()") == CODE, "the code on the clipboard")

    # Read back from chat.history after a reload: the same rendering, the same neutralising.
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    answer = page.locator("#messages .msg.assistant").last
    _check_rendered(answer)
    # a click on the javascript: links (their href dropped) runs nothing either
    answer.locator("a", has_text="a script link").click()
    answer.locator("a", has_text="a script image").click()
    assert page.evaluate(HOSTILE_DOM) == {"handlers": [], "imgs": 0, "scriptLinks": 0, "styled": 0, "fakeUser": 0,
                                          "pwned": None}
    # nothing was even refused by the CSP: no hostile markup reached a parser of the page
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_the_runs_tool_calls_are_collapsible_steps_live_and_in_history(browser, daemon, fake_model):
    fake_model.enqueue(tool_uses(("write_file", {"path": "notes/a.txt", "content": "alpha"}),
                                 ("read_file", {"path": "missing.txt"}), text="Writing, then reading."),
                       text("Wrote `notes/a.txt`; **missing.txt** is not there."))
    page = logged_in(browser, daemon)
    page.fill("#chat-input", "write a then read missing")
    page.click("#chat-send")
    answer = page.locator("#messages .msg.assistant[data-state=final]")
    expect(answer.locator("strong")).to_have_text("missing.txt")
    live = page.locator("#messages details.steps")
    expect(live).to_have_count(1)
    expect(live).to_have_attribute("open", "")
    expect(live.locator(".step")).to_have_count(2)
    expect(live.locator(".step[data-tool=write_file]")).to_have_attribute("data-status", "ok")
    expect(live.locator(".step[data-tool=read_file]")).to_have_attribute("data-status", "error")
    expect(live.locator(".steps-head")).to_have_text("2 tool steps · 1 failed")
    assert (daemon.workspace / "notes/a.txt").read_text() == "alpha"

    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    past = page.locator("#messages details.steps")
    expect(past).to_have_count(1)
    expect(past).not_to_have_attribute("open", "")
    expect(past.locator(".steps-head")).to_have_text("2 tool steps · 1 failed")
    expect(past.locator(".step").first).to_be_hidden()
    past.locator(".steps-head").click()
    first, second = past.locator(".step").first, past.locator(".step").nth(1)
    expect(first).to_be_visible()
    expect(first).to_have_attribute("data-tool", "write_file")
    expect(first).to_have_attribute("data-status", "ok")
    expect(first.locator(".summary")).to_contain_text('"path": "notes/a.txt"')
    expect(second).to_have_attribute("data-status", "error")
    # the run's texts form one answer below its steps, as they streamed
    reply = page.locator("#messages .msg.assistant").last
    expect(reply).to_contain_text("Writing, then reading.")
    expect(reply.locator("code")).to_have_text("notes/a.txt")
    assert page.evaluate("""() => {
      const steps = document.querySelector('#messages details.steps');
      return steps.nextElementSibling.matches('.msg.assistant');
    }""")
    screenshot(page, "steps-history")
    assert not page.errors, page.errors  # type: ignore[attr-defined]


WIDE = " | ".join(f"column {i}" for i in range(12))
NARROW_ANSWER = f"""A wide table, a long line of code and a long link must stay inside a phone screen.

| {WIDE} |
|{"---|" * 12}
| {" | ".join(f"value {i}" for i in range(12))} |

```sh
{"echo " + "very-long-argument-" * 20}
```

https://example.org/{"a-very-long-path-segment/" * 8}
"""

# Widths that would need the page to scroll sideways; a code block or table scrolls inside itself.
OVERFLOW = """() => ({
  viewport: document.documentElement.clientWidth,
  page: document.documentElement.scrollWidth,
  body: document.body.scrollWidth,
  wider: [...document.querySelectorAll('#messages *')].filter((n) => {
    const box = n.getBoundingClientRect();
    return box.width && box.right > document.documentElement.clientWidth + 1 && !n.closest('pre, table');
  }).map((n) => n.tagName + '.' + n.className),
  preScrolls: (() => { const p = document.querySelector('#messages pre'); return p.scrollWidth > p.clientWidth; })(),
  tableScrolls: (() => { const t = document.querySelector('#messages table'); return t.scrollWidth > t.clientWidth; })(),
})"""


def test_at_390px_the_rendered_answer_fits_the_screen(browser, daemon, fake_model):
    fake_model.enqueue(tool_uses(("list_dir", {"path": "."})), text(NARROW_ANSWER))
    page = logged_in(browser, daemon)
    page.set_viewport_size({"width": 390, "height": 844})
    page.fill("#chat-input", "something wide")
    page.click("#chat-send")
    answer = page.locator("#messages .msg.assistant[data-state=final]")
    expect(answer.locator("table th")).to_have_count(12)
    expect(answer.locator(".code-block button.copy")).to_be_visible()
    expect(page.locator("#messages .step[data-tool=list_dir]")).to_be_visible()  # the live steps stay open
    sizes = page.evaluate(OVERFLOW)
    assert sizes["viewport"] == 390, sizes
    assert sizes["page"] <= sizes["viewport"] and sizes["body"] <= sizes["viewport"], sizes
    assert sizes["wider"] == [], sizes
    assert sizes["preScrolls"] and sizes["tableScrolls"], sizes  # cut nowhere: they scroll inside the bubble
    box = answer.locator(".code-block button.copy").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390
    screenshot(page, "markdown-390px")
    assert not page.errors, page.errors  # type: ignore[attr-defined]
