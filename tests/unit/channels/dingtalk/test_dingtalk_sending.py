"""How DingTalk's answers to a send become the kit's DeliveryError, and a message's notification title."""

from __future__ import annotations

from clawgate.channels.dingtalk.adapter import _delivery_error, _title
from clawgate.channels.dingtalk.openapi import ApiError, TokenRefused


def test_throttling_and_outages_are_retried_and_the_rest_is_permanent() -> None:
    for throttled in (ApiError(200, "130101", "send too fast"), ApiError(429, "Throttling.Api", "slow down"),
                      ApiError(403, "Forbidden.AccessDenied.QpsLimitForApi", "qps")):
        error = _delivery_error(throttled)
        assert not error.permanent and not error.channel_down, throttled
    assert not _delivery_error(ApiError(500, "ServiceUnavailable", "down")).permanent
    assert not _delivery_error(ApiError(200, "-1", "system busy")).permanent
    refused = _delivery_error(ApiError(400, "invalidParameter.userIds.empty", "userIds is empty"))
    assert refused.permanent and not refused.too_large
    too_long = _delivery_error(ApiError(400, "invalidParameter.msgParam.tooLong", "too long"))
    assert too_long.permanent and too_long.too_large
    token = _delivery_error(ApiError(401, "InvalidAuthentication", "bad token"))
    assert token.permanent and token.channel_down and "client_secret" in str(token)
    secret = _delivery_error(TokenRefused(400, "invalidClientIdOrSecret", "wrong secret"))  # rotated since start
    assert secret.permanent and secret.channel_down and "client_secret" in str(secret)


def test_the_title_is_the_first_words_as_plain_text() -> None:
    assert _title("## Hello **there**\n\nmore") == "Hello there"
    assert _title("") == "clawgate"
    long = _title("word " * 30)
    assert len(long) == 40 and long.endswith("…")
