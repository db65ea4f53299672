"""``--ws-auth``: the two ways the real binary authenticates a websocket upgrade, with its flags, messages and statuses.

Observed on the real binary (``tests/data/real/<release>/transports/``, ``docs/transports.md``):

- ``capability-token``: ``--ws-token-file PATH`` (absolute; the file's content, trimmed) or ``--ws-token-sha256
  HEX`` (its SHA-256, 64 hex digits; the two are mutually exclusive). The client sends
  ``Authorization: Bearer TOKEN``.
- ``signed-bearer-token``: ``--ws-shared-secret-file PATH`` (trimmed, at least 32 bytes) signs HS256 JWTs; the
  token's ``exp`` is required, ``nbf``, ``iss`` (``--ws-issuer``) and ``aud`` (``--ws-audience``, a string or
  a list) are checked when present or asked for, each with ``--ws-max-clock-skew-seconds`` (default 30).
- A refusal is HTTP 401 with a one-line ``text/plain`` body naming why; a bad set of flags is ``Error: …`` on
  stderr and exit 1, as is a secret file that cannot be read.

One difference, on purpose: the real binary reads a secret file with a plain read, so a FIFO there blocks it
forever; the fake refuses anything that is not a regular file (bounded, never blocking), with exit 1.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any, Final

import orjson

from contracts import bounded_parse, safe_read
from contracts.exitcodes import InvalidInput

MODES: Final = ("capability-token", "signed-bearer-token")
DEFAULT_MAX_CLOCK_SKEW_SECONDS: Final = 30
MIN_SIGNED_SECRET_BYTES: Final = 32
MAX_SECRET_BYTES: Final = 64 * 1024
MAX_TOKEN_CHARS: Final = 16 * 1024
UNAUTHORIZED: Final = 401
INVALID_HEADER: Final = "invalid authorization header"


class AuthConfigError(InvalidInput):
    """Flags that do not make a valid auth setting, or a secret that cannot be read: ``Error: …``, exit 1."""


@dataclass(frozen=True, slots=True)
class AuthFlags:
    mode: str | None = None
    token_file: str | None = None
    token_sha256: str | None = None
    shared_secret_file: str | None = None
    issuer: str | None = None
    audience: str | None = None
    max_clock_skew_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    """What an upgrade must carry. ``mode`` None: nothing (a loopback listener without ``--ws-auth``)."""

    mode: str | None = None
    token_sha256: bytes = b""
    secret: bytes = b""
    issuer: str | None = None
    audience: str | None = None
    skew: int = DEFAULT_MAX_CLOCK_SKEW_SECONDS


def _trimmed(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def _read_secret(path: str) -> str:
    try:
        raw = safe_read.read_bounded(path, MAX_SECRET_BYTES, follow=True)
    except safe_read.Refused as exc:
        raise AuthConfigError(f"failed to read websocket auth secret {path}: {exc.reason}") from None
    except OSError as exc:  # in the real binary's words (Rust's io::Error)
        why = f"{os.strerror(exc.errno)} (os error {exc.errno})" if exc.errno else safe_read.describe(exc)
        raise AuthConfigError(f"failed to read websocket auth secret {path}: {why}") from None
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        why = "stream did not contain valid UTF-8"
        raise AuthConfigError(f"failed to read websocket auth secret {path}: {why}") from None
    if not text:
        raise AuthConfigError(f"websocket auth secret {path} must not be empty")
    return text


def _absolute(path: str) -> str:
    """A relative path is resolved against the working directory, as the real binary does (its help says absolute)."""
    return os.path.abspath(path)


def policy_from_flags(flags: AuthFlags, *, read_secrets: bool = True) -> Policy:
    """The policy the flags set, reading the secret files now (as the real binary does); AuthConfigError else.

    ``read_secrets`` False (``--listen stdio://``, where nothing is authenticated): the flags must still fit
    together, but no secret file is read, so a missing or empty one is no error (observed on the real binary: exit 0),
    and the policy is none."""
    signed_only = (flags.shared_secret_file, flags.issuer, flags.audience, flags.max_clock_skew_seconds)
    if flags.mode is None:
        if flags.token_file or flags.token_sha256 or any(v is not None for v in signed_only):
            raise AuthConfigError(
                "websocket auth flags require `--ws-auth capability-token` or `--ws-auth signed-bearer-token`"
            )
        return Policy()
    if flags.mode == "capability-token":
        if any(v is not None for v in signed_only):
            raise AuthConfigError(
                "`--ws-shared-secret-file`, `--ws-issuer`, `--ws-audience`, and `--ws-max-clock-skew-seconds` "
                "require `--ws-auth signed-bearer-token`"
            )
        if flags.token_file and flags.token_sha256:
            raise AuthConfigError("`--ws-token-file` and `--ws-token-sha256` are mutually exclusive")
        if flags.token_sha256 is not None:
            digest = flags.token_sha256.strip()
            if len(digest) != 64:
                raise AuthConfigError("--ws-token-sha256 must be a 64-character hex SHA-256 digest")
            try:
                return Policy("capability-token", token_sha256=binascii.unhexlify(digest))
            except (binascii.Error, ValueError):
                raise AuthConfigError("--ws-token-sha256 must be a 64-character hex SHA-256 digest") from None
        if not flags.token_file:
            raise AuthConfigError(
                "`--ws-token-file` or `--ws-token-sha256` is required when `--ws-auth capability-token` is set"
            )
        if not read_secrets:
            return Policy()
        token = _read_secret(_absolute(flags.token_file))
        return Policy("capability-token", token_sha256=hashlib.sha256(token.encode()).digest())
    if flags.mode == "signed-bearer-token":
        if flags.token_file or flags.token_sha256:
            raise AuthConfigError("`--ws-token-file` requires `--ws-auth capability-token`, not `signed-bearer-token`")
        if not flags.shared_secret_file:
            raise AuthConfigError("`--ws-shared-secret-file` is required when `--ws-auth signed-bearer-token` is set")
        if not read_secrets:
            return Policy()
        path = _absolute(flags.shared_secret_file)
        secret = _read_secret(path).encode()
        if len(secret) < MIN_SIGNED_SECRET_BYTES:
            raise AuthConfigError(
                f"signed websocket bearer secret {path} must be at least {MIN_SIGNED_SECRET_BYTES} bytes"
            )
        skew = DEFAULT_MAX_CLOCK_SKEW_SECONDS if flags.max_clock_skew_seconds is None else flags.max_clock_skew_seconds
        return Policy(
            "signed-bearer-token",
            secret=secret,
            issuer=_trimmed(flags.issuer),
            audience=_trimmed(flags.audience),
            skew=skew,
        )
    raise AuthConfigError(f"unknown --ws-auth mode {flags.mode!r} (known: {', '.join(MODES)})")


# --- an upgrade's Authorization header -------------------------------------------------------------


def refusal(policy: Policy, authorization: bytes | None, now_s: int) -> str | None:
    """None when the upgrade may go on, else the 401 body the real binary answers with."""
    if policy.mode is None:
        return None
    if authorization is None:
        return "missing websocket bearer token"
    try:
        header = authorization.decode("ascii")
    except UnicodeDecodeError:
        return INVALID_HEADER
    scheme, sep, token = header.partition(" ")
    if not sep or scheme.lower() != "bearer":
        return INVALID_HEADER
    token = token.strip()
    if not token:
        return INVALID_HEADER
    if policy.mode == "capability-token":
        ok = hmac.compare_digest(hashlib.sha256(token.encode()).digest(), policy.token_sha256)
        return None if ok else "invalid websocket bearer token"
    return _jwt_refusal(policy, token, now_s)


def _b64(segment: str) -> bytes:
    if len(segment) > MAX_TOKEN_CHARS:
        raise ValueError("too long")
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _claims(policy: Policy, token: str) -> dict[str, Any] | None:
    """The claims of an HS256 token signed with the policy's secret (None: not one)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        header = bounded_parse.loads_json(_b64(parts[0]))
        claims = bounded_parse.loads_json(_b64(parts[1]))
        signature = _b64(parts[2])
    except (ValueError, orjson.JSONDecodeError):
        return None
    if not isinstance(header, dict) or header.get("alg") != "HS256" or not isinstance(claims, dict):
        return None
    expected = hmac.new(policy.secret, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature):
        return None
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if not _is_int(exp) or (nbf is not None and not _is_int(nbf)):
        return None  # exp is required (an integer), nbf an integer when present: else the token does not decode
    iss, aud = claims.get("iss"), claims.get("aud")
    if iss is not None and not isinstance(iss, str):
        return None
    audiences = aud if isinstance(aud, list) else [aud]
    if aud is not None and not all(isinstance(a, str) for a in audiences):
        return None
    return claims


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _jwt_refusal(policy: Policy, token: str, now_s: int) -> str | None:
    claims = _claims(policy, token)
    if claims is None:
        return "invalid websocket jwt"
    if now_s > claims["exp"] + policy.skew:
        return "expired websocket jwt"
    nbf = claims.get("nbf")
    if nbf is not None and now_s < nbf - policy.skew:
        return "websocket jwt is not valid yet"
    if policy.issuer is not None and claims.get("iss") != policy.issuer:
        return "websocket jwt issuer mismatch"
    if policy.audience is not None:
        aud = claims.get("aud")
        if not (aud == policy.audience or (isinstance(aud, list) and policy.audience in aud)):
            return "websocket jwt audience mismatch"
    return None


def signed_token(secret: bytes, claims: dict[str, Any]) -> str:
    """An HS256 JWT of ``claims`` (what a client of ``signed-bearer-token`` sends; the harness's client and tests
    make theirs with it)."""

    def enc(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = enc(orjson.dumps({"alg": "HS256", "typ": "JWT"}))
    body = enc(orjson.dumps(claims))
    sig = enc(hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest())
    return f"{head}.{body}.{sig}"
