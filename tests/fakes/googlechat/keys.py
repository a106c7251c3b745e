"""RSA keys for the fake: the service account keys the tests make, and the signing key of the fake's
"Chat" issuer with its self-signed certificate (what Google publishes at its certs URL)."""

from __future__ import annotations

import datetime
import secrets
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

PROJECT_ID = "clawgate-fake"
PROJECT_NUMBER = "123456789012"


@dataclass(frozen=True)
class KeyPair:
    kid: str
    private_pem: str
    public_pem: str
    cert_pem: str


def new_key_pair(common_name: str) -> KeyPair:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30)).sign(key, hashes.SHA256()))
    return KeyPair(secrets.token_hex(20), private_pem, public_pem, cert.public_bytes(serialization.Encoding.PEM).decode())


def service_account_key(pair: KeyPair, token_uri: str, email: str) -> dict[str, Any]:
    """A service account key JSON as the Cloud console gives it, its token_uri the fake's."""
    return {"type": "service_account", "project_id": PROJECT_ID, "private_key_id": pair.kid,
            "private_key": pair.private_pem, "client_email": email, "client_id": "10" + pair.kid[:16].translate(
                str.maketrans("abcdef", "123456")), "token_uri": token_uri,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth"}
