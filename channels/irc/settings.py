"""[channels.irc]: the kit's access keys plus the network, the bot's nick and how it logs in."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator, model_validator

from clawgate.channels.kit import AccessSettings


class IrcSettings(AccessSettings):
    """`owner` / `allow_from` name IRC *accounts* (the services account a person logged in to, which the
    server vouches for in each message's `account` tag), never nicks: anyone can take a free nick."""

    host: str = Field("", description="the IRC server's host name (irc.libera.chat)")
    port: int = Field(6697, ge=1, le=65535, description="6697 for TLS, 6667 for plain text")
    tls: bool = Field(True, description="TLS to the server (off only on loopback or a trusted network)")
    tls_verify: bool = Field(True, description="check the server's certificate")
    tls_ca_file: str | None = Field(None, description=(
        "a CA bundle to trust instead of the system's (a private network with its own CA)"))
    tls_certfile: str | None = Field(None, description=(
        "the bot's client certificate (PEM): SASL EXTERNAL logs in by it, once its fingerprint is added to the "
        "account (NickServ CERT ADD); no password kept"))
    tls_keyfile: str | None = Field(None, description="the certificate's private key (default: in tls_certfile)")
    nick: str = Field("clawgate", min_length=1, max_length=30, description="the bot's nick")
    username: str = Field("clawgate", min_length=1, description="the ident part of nick!user@host")
    realname: str = Field("clawgate agent", description="shown in WHOIS")
    sasl_username: str | None = Field(None, description="the bot's services account for SASL PLAIN (default: nick)")
    sasl_password: SecretStr | None = Field(None, description="SASL PLAIN password: the preferred log-in")
    nickserv_password: SecretStr | None = Field(None, description="NickServ IDENTIFY after connecting, where no SASL")
    server_password: SecretStr | None = Field(None, description="the server's own PASS, where it wants one")
    channels: list[str] = Field(default_factory=list, description="channels to join (#name or '#name key')")
    flood_burst: int = Field(4, ge=1, le=100, description="lines sent at once before pacing starts")
    flood_lines_per_second: float = Field(0.5, gt=0, le=100, description="lines per second after the burst")
    timeout_seconds: float = Field(30.0, gt=0, description="connecting, logging in and joining, each at most")
    idle_seconds: float = Field(120.0, gt=0, description="a silent server is PINGed after this, dropped after twice")

    @model_validator(mode="after")
    def _certificate_needs_tls(self) -> "IrcSettings":
        if self.tls_certfile and not self.tls:
            raise ValueError("tls_certfile is a TLS client certificate: set tls = true (and the TLS port) to use it")
        if self.tls_keyfile and not self.tls_certfile:
            raise ValueError("tls_keyfile is set without tls_certfile: set tls_certfile to the certificate")
        return self

    @property
    def sasl_mechanism(self) -> str | None:
        """PLAIN with a password, else EXTERNAL with a client certificate, else no SASL."""
        if self.sasl_password:
            return "PLAIN"
        return "EXTERNAL" if self.tls_certfile else None

    @field_validator("channels")
    @classmethod
    def _channel_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name or name[0] not in "#&!+" or any(c in name for c in ",\r\n\0\x07"):
                raise ValueError(f"{name!r} is not a channel name: write it as '#name' (quoted in TOML)")
        return value
