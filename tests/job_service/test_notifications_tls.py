"""Mail over TLS: STARTTLS and implicit TLS to a real SMTP server (aiosmtpd) with a
certificate from a private certificate authority made here, trusted through
``notifications.email.ca_file``. A certificate nobody vouched for, or one for another
host, fails the attempt with the reason; no mail goes on in the clear."""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .conftest import start_service, stop_all
from .test_notifications import Inbox, free_port, put_settings

pytestmark = pytest.mark.timeout(120)


class Authority:
    """A certificate authority of the test's own, signing server certificates."""

    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            self._builder(subject, self.key.public_key())
            .issuer_name(subject)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )  # fmt: skip

    @staticmethod
    def _builder(
        subject: x509.Name, public_key: ec.EllipticCurvePublicKey
    ) -> x509.CertificateBuilder:
        now = datetime.now(timezone.utc)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
        )

    def pem(self, folder: Path) -> Path:
        path = folder / "ca.pem"
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return path

    def server_context(self, folder: Path, *, host: str = "127.0.0.1") -> ssl.SSLContext:
        """A server's TLS context with a certificate this authority signed for ``host``."""
        key = ec.generate_private_key(ec.SECP256R1())
        try:
            names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(host))]
        except ValueError:
            names = [x509.DNSName(host)]
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
        server_auth = x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH])
        issuer_key = x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key())
        cert = (
            self._builder(subject, key.public_key())
            .issuer_name(self.cert.subject)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(server_auth, critical=False)
            .add_extension(issuer_key, critical=False)
            .sign(self.key, hashes.SHA256())
        )
        cert_file, key_file = folder / "server.pem", folder / "server.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        return context


def mail_config(port: int, security: str, ca_file: Path) -> dict:
    return {
        "notifications": {
            "email": {
                "smtp_host": "127.0.0.1",
                "smtp_port": port,
                "from": "nbjobs@uni.example",
                "security": security,
                "ca_file": str(ca_file),
                "allowed_domains": ["uni.example"],
            },
            "first_delay": 1,
        }
    }


def smtp_server(context: ssl.SSLContext, security: str) -> Controller:
    inbox = Inbox()
    if security == "ssl":
        controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), ssl_context=context)
    else:  # STARTTLS, and no mail taken before it
        controller = Controller(
            inbox, hostname="127.0.0.1", port=free_port(), tls_context=context,
            require_starttls=True,
        )  # fmt: skip
    controller.start()
    return controller


async def a_failed_job_told(tmp_path: Path, config: dict) -> list[dict]:
    """ada asks for mail when a job fails, and one fails; the mail's record once tried."""
    svc = await start_service(tmp_path, config)
    try:
        assert (await put_settings(svc, "ada", email="ada@uni.example")).status_code == 200
        svc.write("ada", "bad.ipynb", "1 / 0")
        await svc.wait("ada", (await svc.submit("ada", "bad.ipynb"))["id"])
        async with svc.client("ada") as c:
            for _ in range(300):
                sent = (await c.get("notifications")).json()["notifications"]
                if sent and (sent[0]["state"] == "sent" or sent[0]["attempts"]):
                    return list(sent)
                await asyncio.sleep(0.1)
    finally:
        await stop_all(svc)
    raise AssertionError("the mail was never tried")


async def mailed(
    tmp_path: Path, server: ssl.SSLContext, security: str, trusted: Authority
) -> tuple[dict, list]:
    """A job's failure mailed to a server with this TLS context, by a service that trusts
    ``trusted``: the mail's record, and what the server received."""
    controller = smtp_server(server, security)
    try:
        config = mail_config(controller.port, security, trusted.pem(tmp_path))
        [mail] = await a_failed_job_told(tmp_path, config)
    finally:
        controller.stop()
    return mail, controller.handler.mails


@pytest.mark.parametrize("security", ["starttls", "ssl"])
async def test_mail_goes_over_tls_to_a_server_the_ca_file_vouches_for(tmp_path, security):
    authority = Authority("uni.example internal CA")

    mail, received = await mailed(tmp_path, authority.server_context(tmp_path), security, authority)

    assert mail["state"] == "sent", mail
    [message] = received
    assert message["To"] == "ada@uni.example"
    assert "failed" in message["Subject"]


@pytest.mark.parametrize("security", ["starttls", "ssl"])
async def test_a_certificate_nobody_vouched_for_fails_the_attempt_and_sends_nothing(
    tmp_path, security
):
    trusted, rogue = Authority("uni.example internal CA"), Authority("somebody else")

    mail, received = await mailed(tmp_path, rogue.server_context(tmp_path), security, trusted)

    assert mail["state"] != "sent"
    assert "certificate verify failed" in mail["attempts"][0]["error"]
    assert received == []


async def test_a_certificate_for_another_host_fails_the_attempt(tmp_path):
    authority = Authority("uni.example internal CA")
    # signed by the trusted authority, but for another name than the host nbjobs dials
    elsewhere = authority.server_context(tmp_path, host="mail.uni.example")

    mail, received = await mailed(tmp_path, elsewhere, "starttls", authority)

    assert mail["state"] != "sent"
    assert "certificate verify failed" in mail["attempts"][0]["error"]
    assert "mismatch" in mail["attempts"][0]["error"]
    assert received == []
