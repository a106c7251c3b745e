from tests.fleet_support import fleet_factory, redis_server  # noqa: F401  (fixtures)
from tests.telegram_support import telegram  # noqa: F401
