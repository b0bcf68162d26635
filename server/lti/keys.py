"""The tool's RSA key pair and its public JWKS.

The private key is generated once (RSA 2048, public exponent 65537) into
`<data_dir>/lti_private_key.pem` (PKCS#8 PEM, mode 0600, created with O_EXCL so concurrent server
processes end up with one key) and read from there afterwards. `GET /lti/jwks` serves the public
key as a JWK Set (RFC 7517) whose `kid` is the key's RFC 7638 thumbprint (SHA-256,
base64url), so the kid changes exactly when the key does. Platforms verify the tool's JWTs
(deep linking responses, client assertions) against it (Security Framework 6.3).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

KEY_FILE = "lti_private_key.pem"
KEY_BITS = 2048


@dataclass(frozen=True)
class ToolKey:
    """The tool's key pair.

    Attributes:
        private_key: the RSA private key (signs the tool's JWTs, RS256).
        kid: RFC 7638 thumbprint of the public key (SHA-256, base64url without padding).
    """

    private_key: rsa.RSAPrivateKey
    kid: str

    def public_jwk(self) -> dict[str, str]:
        """The public key as a JWK (RFC 7517) with kid, use "sig" and alg "RS256"."""
        jwk = json.loads(RSAAlgorithm.to_jwk(self.private_key.public_key()))
        return {"kty": "RSA", "n": jwk["n"], "e": jwk["e"], "kid": self.kid, "use": "sig", "alg": "RS256"}

    def jwks(self) -> dict[str, list[dict[str, str]]]:
        """The public JWK Set: {"keys": [the public JWK]}."""
        return {"keys": [self.public_jwk()]}

    def public_pem(self) -> str:
        """The public key as PEM (SubjectPublicKeyInfo), for LMSs that take a key instead of a JWKS URL."""
        return (
            self.private_key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode("ascii")
        )

    def sign(self, claims: dict, *, headers: dict | None = None) -> str:
        """A JWT of `claims` signed RS256 with this key, `kid` in its header."""
        return jwt.encode(claims, self.private_key, algorithm="RS256", headers={"kid": self.kid, **(headers or {})})


def thumbprint(public_key: rsa.RSAPublicKey) -> str:
    """RFC 7638 JWK thumbprint (SHA-256, base64url without padding) of an RSA public key."""
    jwk = json.loads(RSAAlgorithm.to_jwk(public_key))
    # RFC 7638 3.2-3.3: the required members only, in lexicographic order, no whitespace
    canonical = json.dumps({"e": jwk["e"], "kty": "RSA", "n": jwk["n"]}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode("ascii")).digest()).rstrip(b"=").decode("ascii")


def _pem(private_key: rsa.RSAPrivateKey) -> bytes:
    return private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_or_create(data_dir: Path) -> ToolKey:
    """The tool's key from `<data_dir>/lti_private_key.pem`, generated there (0600) on first use.

    Raises:
        ValueError: the file exists but holds no RSA private key.
    """
    path = data_dir / KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # another process is writing it: read it once it is complete
            pass
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(_pem(rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)))
    data = b""
    for _ in range(100):  # a concurrent writer finishes within milliseconds
        data = path.read_bytes()
        if b"END PRIVATE KEY" in data:
            break
        time.sleep(0.05)
    key = serialization.load_pem_private_key(data, password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"{path} holds no RSA private key")
    return ToolKey(private_key=key, kid=thumbprint(key.public_key()))
