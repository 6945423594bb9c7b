"""Encryption of a store's processor secrets (issue 16): Fernet (the ``cryptography`` library),
keyed by ``REBILL_SECRET_KEY``.

The setting holds one Fernet key, or several separated by commas: the first encrypts, every
one decrypts, so an operator rotates by putting a new key first and, once every store's keys
were written again, dropping the old one. Nothing here ever logs, prints or repeats the
plain text, and the errors name no secret.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

GENERATE = 'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'


class VaultError(Exception):
    """The vault cannot encrypt or decrypt; the message says why (never what)."""


class Vault:
    def __init__(self, keys: str | None) -> None:
        self._fernet: MultiFernet | None = None
        if keys and keys.strip():
            try:
                self._fernet = MultiFernet([Fernet(part.strip().encode()) for part in keys.split(",") if part.strip()])
            except (ValueError, TypeError):
                raise VaultError("REBILL_SECRET_KEY must be Fernet keys (32 url-safe base64-encoded bytes each, "
                                 f"comma-separated); make one with {GENERATE}") from None

    @property
    def ready(self) -> bool:
        return self._fernet is not None

    def encrypt(self, text: str) -> str:
        if self._fernet is None:
            raise VaultError(f"REBILL_SECRET_KEY is not set; make a key with {GENERATE} and set it")
        return self._fernet.encrypt(text.encode()).decode()

    def decrypt(self, token: str) -> str:
        if self._fernet is None:
            raise VaultError("REBILL_SECRET_KEY is not set, so the store's encrypted keys cannot be read")
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise VaultError("the store's keys were encrypted with another REBILL_SECRET_KEY") from None
