"""The Hypothesis example database a campaign shares: a directory (default) or a Redis server (a fleet).

``open_database(location)`` takes a directory path or a ``redis://host:port/db`` URL and checks
it is usable before any example runs; a bad setting is a `DatabaseError` with a one-line message.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

DEFAULT_LOCATION = ".hypothesis/examples"
ENVIRONMENT_VARIABLE = "FUZZ_DATABASE"
# Failures must outlive a holiday; Hypothesis's own default expiry is 8 days.
REDIS_EXPIRY = timedelta(days=365)


class DatabaseError(ValueError):
    """The database setting cannot be used; the message says why and what to do."""


def default_location() -> str:
    """$FUZZ_DATABASE when set, else the directory database in the checkout."""
    return os.environ.get(ENVIRONMENT_VARIABLE) or DEFAULT_LOCATION


def _redis(url: str) -> ExampleDatabase:
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:  # pragma: no cover - redis is a declared dependency
        raise DatabaseError(f"database {url}: the 'redis' package is not installed; pip install redis") from None
    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30)
    try:
        client.ping()
    except redis.RedisError as error:
        raise DatabaseError(
            f"database {url}: cannot reach Redis ({type(error).__name__}: {error}); start redis-server there "
            "or use a directory"
        ) from None
    return RedisExampleDatabase(client, expire_after=REDIS_EXPIRY)


def _directory(path: Path) -> ExampleDatabase:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DatabaseError(f"database {path}: cannot create it ({error.strerror}); choose another") from None
    if not os.access(path, os.W_OK):
        raise DatabaseError(f"database {path}: directory is not writable; choose another")
    return DirectoryBasedExampleDatabase(path)


def open_database(location: str) -> ExampleDatabase:
    """The example database at ``location``: ``redis://...`` (or ``rediss://``) or a directory path."""
    if location.startswith(("redis://", "rediss://", "unix://")):
        return _redis(location)
    if "://" in location:
        raise DatabaseError(f"database {location}: unknown scheme; use a directory or redis://host:port/db")
    return _directory(Path(location))


# Hypothesis's corpora of a test's key: its failures, then the other examples it keeps.
_CORPORA = (b"", b".secondary", b".pareto")


def adopt_examples(database: ExampleDatabase, old_key: bytes, key: bytes) -> int:
    """Move every example ``database`` holds under ``old_key`` (and its sub-keys) to ``key``'s; returns how many."""
    moved = 0
    for corpus in _CORPORA:
        for value in list(database.fetch(old_key + corpus)):
            database.move(old_key + corpus, key + corpus, value)
            moved += 1
    return moved
