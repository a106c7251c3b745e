"""A fake Slack server for tests: Web API, Socket Mode and signed Events API requests.

The real slack_sdk runs against it unmodified::

    with FakeSlack(ack_timeout=0.5) as fake:
        web = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        sm = SocketModeClient(app_token=APP_TOKEN, web_client=AsyncWebClient(base_url=fake.api_url))
        await sm.connect()                       # URL from the fake's apps.connections.open
        env = fake.send_message("hi")            # a DM from the owner, as an events_api envelope
        await fake.wait_for_async(lambda f: env.acked)
        await fake.wait_for_async(lambda f: f.posted(workspace.OWNER_DM))

Inject: send_message, send_mention, send_file (a shared file: files.info and url_private for the
bot token), send_event, press_button (block_actions), slash_command,
disconnect(reason), socket.lose_acks(n); fail / rate_limit (the next calls of a method); post_signed (an HTTP Events
API request to an app's URL, signed v0). Observe: calls (every Web API call and its answer),
frames (every Socket Mode text frame, both ways), envelopes (every delivery attempt: acked, expired,
retry_attempt, ack payload), uploads, file_fetches, responses (posts to response_url), posted(channel), and
wait_for / wait_for_async (a condition wait). State: fake.workspace (users, conversations,
messages, files).

One module per job: workspace (ids, users, conversations, payloads), limits (what Slack refuses
in a message), webapi (methods), socket_mode (envelopes, acks, retries, disconnect), signing (v0
request signatures), server (HTTP, threads, injection, recording).
"""
