"""Reviewer accounts in the task store (docs/review.md "Team set-up"). An edge: it reads the
clock and the store.

An account has a name (what every label records as its reviewer), a role — ``reviewer``
reviews the rows of the queues they are in, ``lead`` also makes queues, settles disputes and
reopens rows, ``admin`` also manages accounts — and ways to sign in: a one-time sign-in token
(printed once, stored as its SHA-256: a random 192-bit token needs no slow hash) and, if the
reviewer sets one, a password stored with scrypt (:func:`hashlib.scrypt`, a standard KDF).
Revoking an account ends its sessions (their epoch no longer matches) and keeps its labels.
The secret that signs sessions is kept in the store's ``meta`` table, so every server over
the same store accepts the same sessions.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, get_args

from rubric_engine.errors import ConfigurationError, InputError
from rubric_engine.store.backend import Backend

Role = Literal["reviewer", "lead", "admin"]
ROLES: tuple[str, ...] = get_args(Role)
#: a sign-in token is good for this long unless said otherwise
DEFAULT_TOKEN_HOURS = 168
#: shortest password accepted
MIN_PASSWORD = 10
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
_NAME = re.compile(r"^[^\s\x00-\x1f\x7f<>\"'&/\\]{1,80}$")
_SECRET = "review_session_secret"

__all__ = [
    "DEFAULT_TOKEN_HOURS",
    "ROLES",
    "Account",
    "account",
    "accounts",
    "add_reviewer",
    "check_name",
    "check_password",
    "issue_token",
    "redeem_token",
    "revoke",
    "session_secret",
    "set_password",
]


def _now() -> datetime:
    return datetime.now(UTC)


def _text(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Account:
    """One reviewer account."""

    name: str
    role: Role
    created_at: str
    revoked_at: str | None
    session_epoch: int
    has_password: bool
    token_expires_at: str | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def leads(self) -> bool:
        """May make queues, settle disputes and reopen rows."""
        return self.role in ("lead", "admin")


def check_name(name: str) -> str:
    """Raises: InputError: not 1-80 visible characters without spaces, quotes, ``<>&/\\``."""
    if not _NAME.match(name):
        raise InputError(
            f"reviewer name {name!r}: use 1-80 characters without spaces, quotes, <, >, &, / or "
            "\\ (a name or an e-mail address, e.g. alice or alice@example.org)"
        )
    return name


def check_role(role: str) -> Role:
    """Raises: ConfigurationError: not one of :data:`ROLES`."""
    if role not in ROLES:
        raise ConfigurationError(f"role {role!r} is not valid; use one of {', '.join(ROLES)}")
    return role  # type: ignore[return-value]


_COLUMNS = (
    "name, role, created_at, revoked_at, session_epoch, password_hash IS NOT NULL, token_expires_at"
)


def _account(found: tuple[object, ...] | None) -> Account | None:
    if found is None:
        return None
    name, role, created, revoked, epoch, has_password, expires = found
    return Account(
        str(name),
        check_role(str(role)),
        str(created),
        None if revoked is None else str(revoked),
        int(str(epoch)),
        bool(has_password),
        None if expires is None else str(expires),
    )


def account(db: Backend, name: str) -> Account | None:
    """The account named ``name`` (revoked ones too), or ``None``."""
    query = f"SELECT {_COLUMNS} FROM reviewers WHERE name=?"
    return _account(db.execute(query, (name,)).fetchone())


def accounts(db: Backend) -> list[Account]:
    """Every account, by name."""
    rows = db.execute(f"SELECT {_COLUMNS} FROM reviewers ORDER BY name").fetchall()
    return [a for a in map(_account, rows) if a is not None]


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _new_token(db: Backend, name: str, hours: int) -> str:
    token = secrets.token_urlsafe(24)
    db.execute(
        "UPDATE reviewers SET token_hash=?, token_expires_at=? WHERE name=?",
        (_token_hash(token), _text(_now() + timedelta(hours=hours)), name),
    )
    return token


def add_reviewer(
    db: Backend, name: str, role: str, hours: int = DEFAULT_TOKEN_HOURS
) -> tuple[Account, str]:
    """Add an account (or give a revoked one back, with the new role) and a sign-in token.

    Returns:
        The account and its one-time sign-in token (stored only as a hash: show it once).

    Raises:
        InputError: a bad name, or one that differs only by case from an account's;
            ConfigurationError: a bad role, or the account exists and is active
            (``reviewers link NAME`` gives it a new token).
    """
    check_name(name)
    checked = check_role(role)
    with db.exclusive("reviewers"):
        found = account(db, name)
        twin = next(
            (a for a in accounts(db) if a.name != name and a.name.casefold() == name.casefold()),
            None,
        )
        if found is None and twin is not None:  # two spellings: two reviewers in calibration
            raise InputError(
                f"reviewer name {name!r} differs only by case from the account {twin.name!r}: "
                "their labels would count as two reviewers; if they are one person, use "
                f"{twin.name!r} (`rubric-eval reviewers link {twin.name}` prints a new sign-in "
                "link), else give each a name that differs by more than case"
            )
        if found is not None and found.active:
            raise ConfigurationError(
                f"reviewer {name} exists ({found.role}); `rubric-eval reviewers link {name}` "
                "prints a new sign-in link"
            )
        if found is None:
            db.execute(
                "INSERT INTO reviewers (name, role, created_at) VALUES (?, ?, ?)",
                (name, checked, _text(_now())),
            )
        else:
            db.execute("UPDATE reviewers SET role=?, revoked_at=NULL WHERE name=?", (checked, name))
        token = _new_token(db, name, hours)
    added = account(db, name)
    assert added is not None
    return added, token


def _active(db: Backend, name: str) -> Account:
    found = account(db, name)
    if found is None or not found.active:
        known = ", ".join(a.name for a in accounts(db) if a.active) or "none yet"
        raise ConfigurationError(
            f"no active reviewer {name!r} (active: {known}); add one with "
            f"`rubric-eval reviewers add {name} --role reviewer`"
        )
    return found


def issue_token(db: Backend, name: str, hours: int = DEFAULT_TOKEN_HOURS) -> str:
    """A new one-time sign-in token for ``name`` (an earlier unused one stops working).

    Raises:
        ConfigurationError: no such active account.
    """
    with db.exclusive("reviewers"):
        _active(db, name)
        return _new_token(db, name, hours)


def redeem_token(db: Backend, token: str) -> Account | None:
    """The active account whose unexpired token this is; the token is used up. ``None`` for a
    wrong, used or expired token."""
    with db.exclusive("reviewers"):
        found = db.execute(
            "SELECT name FROM reviewers WHERE token_hash=? AND revoked_at IS NULL "
            "AND token_expires_at>?",
            (_token_hash(token), _text(_now())),
        ).fetchone()
        if found is None:
            return None
        db.execute("UPDATE reviewers SET token_hash=NULL WHERE name=?", (found[0],))
    return account(db, str(found[0]))


def _scrypt(password: str, salt: bytes) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, dklen=32, **_SCRYPT)


def set_password(db: Backend, name: str, password: str) -> None:
    """Raises: InputError: shorter than :data:`MIN_PASSWORD`; ConfigurationError: no such
    active account."""
    if len(password) < MIN_PASSWORD:
        raise InputError(f"a password needs at least {MIN_PASSWORD} characters")
    salt = secrets.token_bytes(16)
    encoded = "$".join(
        [
            "scrypt",
            *(str(v) for v in _SCRYPT.values()),
            base64.b64encode(salt).decode(),
            base64.b64encode(_scrypt(password, salt)).decode(),
        ]
    )
    with db.exclusive("reviewers"):
        _active(db, name)
        db.execute("UPDATE reviewers SET password_hash=? WHERE name=?", (encoded, name))


def check_password(db: Backend, name: str, password: str) -> Account | None:
    """The active account when ``password`` is its password, else ``None``."""
    found = db.execute(
        "SELECT password_hash FROM reviewers WHERE name=? AND revoked_at IS NULL", (name,)
    ).fetchone()
    if found is None or found[0] is None:
        return None
    _, n, r, p, salt, digest = str(found[0]).split("$")
    given = hashlib.scrypt(
        password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p), dklen=32
    )
    return account(db, name) if hmac.compare_digest(given, base64.b64decode(digest)) else None


def revoke(db: Backend, name: str) -> Account:
    """End the account's sign-ins and sessions; its labels stay as they are.

    Raises:
        ConfigurationError: no such active account.
    """
    with db.exclusive("reviewers"):
        _active(db, name)
        db.execute(
            "UPDATE reviewers SET revoked_at=?, token_hash=NULL, token_expires_at=NULL, "
            "password_hash=NULL, session_epoch=session_epoch+1 WHERE name=?",
            (_text(_now()), name),
        )
    revoked = account(db, name)
    assert revoked is not None
    return revoked


def session_secret(db: Backend) -> str:
    """The key sessions are signed with, made on first use and kept in the store."""
    found = db.execute("SELECT value FROM meta WHERE name=?", (_SECRET,)).fetchone()
    if found is not None:
        return str(found[0])
    with db.exclusive("reviewers"):
        found = db.execute("SELECT value FROM meta WHERE name=?", (_SECRET,)).fetchone()
        if found is None:
            secret = secrets.token_hex(32)
            db.execute("INSERT INTO meta (name, value) VALUES (?, ?)", (_SECRET, secret))
            return secret
    return str(found[0])
