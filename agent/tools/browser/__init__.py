"""The agent's web browser: Chromium driven through Playwright, every request through a checking proxy."""

from .tool import Browser

__all__ = ["Browser"]
