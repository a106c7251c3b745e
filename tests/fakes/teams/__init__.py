"""A fake Microsoft Teams: OpenID metadata + signing keys, the token service, the Bot Connector, and the sender."""

from tests.fakes.teams.reading import code_of, formats_of, plain_of
from tests.fakes.teams.server import APP_ID, APP_PASSWORD, TENANT_ID, FakeTeams, Person, Sent

__all__ = ["APP_ID", "APP_PASSWORD", "FakeTeams", "Person", "Sent", "TENANT_ID", "code_of", "formats_of", "plain_of"]
