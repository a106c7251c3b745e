"""What Slack refuses in a message, checked the way the Web API checks it.

Sources and judgement (Slack does not document all of this precisely):
- ``text``: the chat.postMessage reference asks for at most 4,000 characters and says text over
  40,000 is truncated (the 2018 "truncating really long messages" change, with a
  ``message_truncated`` warning). In current practice Slack answers ``msg_too_long`` well below
  40,000 (reported from 4,000-odd characters up, and confirmed by the SDK's maintainers in 2024 as
  a platform limit smaller than 40K). The fake refuses text over ``MAX_TEXT_CHARS`` = 4,000 with
  ``msg_too_long``: an adapter that passes here is safe on Slack; the limit is a constructor
  argument for tests that want the 40,000 figure.
- ``blocks``: at most 50 in a message; section text 3,000 characters, section fields 10 of 2,000
  each; header text 150; button text 75, value 2,000, action_id / block_id 255; actions 25 elements;
  context 10 elements; a ``markdown`` block 12,000 characters, cumulative over the message.
  Breaking one of these gives ``invalid_blocks`` with an ``errors`` list (json-pointers), as Slack
  does. Over the cumulative text of all blocks Slack answers ``msg_blocks_too_long``; its exact
  threshold is undocumented (Slack's staff cite "12,000 text characters with a buffer for block
  containers"), so the fake refuses more than 12,000 characters of block text.
- neither ``text`` nor ``blocks`` nor ``attachments``: ``no_text``.
"""

from __future__ import annotations

import json
from typing import Any

MAX_TEXT_CHARS = 4_000
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3_000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2_000
MAX_HEADER_TEXT = 150
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2_000
MAX_ID = 255
MAX_ACTIONS_ELEMENTS = 25
MAX_CONTEXT_ELEMENTS = 10
MAX_MARKDOWN_TEXT = 12_000
MAX_BLOCKS_TEXT = 12_000

BLOCK_TYPES = {"section", "header", "divider", "actions", "context", "image", "rich_text", "markdown",
               "input", "file", "video", "table", "context_actions"}
TEXT_TYPES = {"plain_text", "mrkdwn"}


class ApiError(Exception):
    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


def parse_json_arg(value: Any, error: str) -> Any:
    """Arguments sent as form fields arrive as JSON strings (blocks, attachments, files)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ApiError(error) from None
    return value


def _text_len(obj: Any) -> int:
    if isinstance(obj, dict):
        return sum(len(v) if k == "text" and isinstance(v, str) else _text_len(v) for k, v in obj.items())
    if isinstance(obj, list):
        return sum(_text_len(v) for v in obj)
    return 0


def check_blocks(blocks: Any) -> list[dict]:
    """Validate a message's blocks; returns them parsed, raises ApiError as Slack would."""
    blocks = parse_json_arg(blocks, "invalid_blocks_format")
    if not isinstance(blocks, list):
        raise ApiError("invalid_blocks_format")
    errors: list[str] = []

    def bad(msg: str, ptr: str) -> None:
        errors.append(f"{msg} [json-pointer:{ptr}]")

    def text_obj(obj: Any, ptr: str, limit: int, *, plain_only: bool = False) -> None:
        if not isinstance(obj, dict) or obj.get("type") not in TEXT_TYPES or not isinstance(obj.get("text"), str):
            bad("must be a valid text object", ptr)
            return
        if plain_only and obj["type"] != "plain_text":
            bad("must be plain_text", ptr + "/type")
        if len(obj["text"]) > limit:
            bad(f"must be less than {limit + 1} characters", ptr + "/text")
        if not obj["text"]:
            bad("must be more than 0 characters", ptr + "/text")

    if len(blocks) > MAX_BLOCKS:
        bad(f"must provide an array with no more than {MAX_BLOCKS} items", "/blocks")
    seen_ids: set[str] = set()
    markdown_total = 0
    for i, block in enumerate(blocks):
        ptr = f"/blocks/{i}"
        if not isinstance(block, dict) or block.get("type") not in BLOCK_TYPES:
            bad("must be a valid block type", ptr + "/type")
            continue
        block_id = block.get("block_id")
        if block_id is not None:
            if len(str(block_id)) > MAX_ID:
                bad(f"must be less than {MAX_ID + 1} characters", ptr + "/block_id")
            if block_id in seen_ids:
                bad("block_id must be unique", ptr + "/block_id")
            seen_ids.add(block_id)
        kind = block["type"]
        if kind == "section":
            if "text" not in block and "fields" not in block:
                bad("must provide text or fields", ptr)
            if "text" in block:
                text_obj(block["text"], ptr + "/text", MAX_SECTION_TEXT)
            fields = block.get("fields", [])
            if len(fields) > MAX_SECTION_FIELDS:
                bad(f"must provide an array with no more than {MAX_SECTION_FIELDS} items", ptr + "/fields")
            for j, f in enumerate(fields):
                text_obj(f, f"{ptr}/fields/{j}", MAX_FIELD_TEXT)
        elif kind == "header":
            text_obj(block.get("text"), ptr + "/text", MAX_HEADER_TEXT, plain_only=True)
        elif kind == "markdown":
            text = block.get("text")
            if not isinstance(text, str):
                bad("must provide a string", ptr + "/text")
            else:
                markdown_total += len(text)
        elif kind in ("actions", "context"):
            elements = block.get("elements")
            limit = MAX_ACTIONS_ELEMENTS if kind == "actions" else MAX_CONTEXT_ELEMENTS
            if not isinstance(elements, list) or not elements:
                bad("must provide a non-empty array", ptr + "/elements")
                continue
            if len(elements) > limit:
                bad(f"must provide an array with no more than {limit} items", ptr + "/elements")
            for j, el in enumerate(elements):
                eptr = f"{ptr}/elements/{j}"
                if kind == "context" or not isinstance(el, dict) or el.get("type") != "button":
                    continue
                text_obj(el.get("text"), eptr + "/text", MAX_BUTTON_TEXT, plain_only=True)
                if len(str(el.get("action_id", ""))) > MAX_ID:
                    bad(f"must be less than {MAX_ID + 1} characters", eptr + "/action_id")
                if len(str(el.get("value", ""))) > MAX_BUTTON_VALUE:
                    bad(f"must be less than {MAX_BUTTON_VALUE + 1} characters", eptr + "/value")
                if el.get("style") not in (None, "primary", "danger"):
                    bad("must be one of primary, danger", eptr + "/style")
    if markdown_total > MAX_MARKDOWN_TEXT:
        bad(f"cumulative markdown text must be less than {MAX_MARKDOWN_TEXT + 1} characters", "/blocks")
    if errors:
        raise ApiError("invalid_blocks", errors=errors,
                       response_metadata={"messages": [f"[ERROR] {e}" for e in errors]})
    if _text_len(blocks) > MAX_BLOCKS_TEXT:
        raise ApiError("msg_blocks_too_long")
    return blocks


def check_message(params: dict, *, max_text: int) -> tuple[str | None, list[dict] | None]:
    """The content checks shared by chat.postMessage and chat.update."""
    text = params.get("text")
    blocks = check_blocks(params["blocks"]) if params.get("blocks") not in (None, "") else None
    attachments = params.get("attachments")
    if not text and not blocks and not attachments:
        raise ApiError("no_text")
    if text is not None and len(str(text)) > max_text:
        raise ApiError("msg_too_long")
    return (str(text) if text is not None else None), blocks
