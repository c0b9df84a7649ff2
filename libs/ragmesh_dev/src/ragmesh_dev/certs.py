"""A private CA and per-process certificates for mTLS between the services of a local stack and in tests.

    ca = CertificateAuthority.create("ragmesh dev CA")
    ca.write(folder)                                  # ca.crt
    ca.issue("retriever").write(folder, "retriever")   # retriever.crt, retriever.key (0600)

Every certificate is valid as a server and as a client (a service is both), for 127.0.0.1 and localhost unless
other names are given. EC P-256 keys, SHA-256 signatures (the `cryptography` package).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOCAL_NAMES = ("127.0.0.1", "localhost")
VALID_DAYS = 365


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ragmesh"), x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(data)


@dataclass(frozen=True, repr=False)
class Issued:
    """A certificate and its private key (PEM)."""

    cert: bytes
    key: bytes

    def write(self, folder: Path, name: str) -> tuple[Path, Path]:
        """`<name>.crt` and `<name>.key` (0600) in `folder`; returns their paths."""
        folder.mkdir(parents=True, exist_ok=True)
        cert, key = folder / f"{name}.crt", folder / f"{name}.key"
        cert.write_bytes(self.cert)
        _write_private(key, self.key)
        return cert, key


@dataclass(frozen=True, repr=False)
class CertificateAuthority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, common_name: str = "ragmesh mesh CA") -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @classmethod
    def load(cls, cert_path: Path, key_path: Path) -> CertificateAuthority:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path} is not an EC private key")
        return cls(key, x509.load_pem_x509_certificate(cert_path.read_bytes()))

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, folder: Path, with_key: bool = False) -> Path:
        """`ca.crt` (and, with_key, `ca.key` at 0600, to issue more later) in `folder`; returns the cert path."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ca.crt").write_bytes(self.cert_pem)
        if with_key:
            _write_private(folder / "ca.key", _key_pem(self.key))
        return folder / "ca.crt"

    def issue(self, common_name: str, names: tuple[str, ...] = LOCAL_NAMES) -> Issued:
        """A server-and-client certificate for `names` (DNS names or IP addresses)."""
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for name in names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))
