from tests.fleet_support import redis_server  # noqa: F401  (the real redis-server, once per session)
