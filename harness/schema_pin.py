"""A release's wire schema, pinned from its binary: the bundles ``generate-json-schema`` prints, compared with a
pin or written into the user's store (``schema pin``, ``validate-release``, ``release learn``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from codex_client.stderr import strip_ansi
from codex_sandbox.bounded_run import OutputOverflow
from codex_sandbox.confine import ConfinementUnavailable
from contracts import schema_store
from contracts.exitcodes import UsageError
from harness.codex_bin import run_binary, run_dir

GENERATE_TIMEOUT_S = 60.0


def _writable_target(root: Path) -> None:
    probe = root
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(
            f"cannot write the schema store {root}: {probe} is not a writable directory ({schema_store.store_hint()})"
        )


def user_store_to_write(store: str | os.PathLike[str] | None) -> Path:
    """The user's schema store a command pins into: never the package's shipped pins, writable (else exit 3)."""
    root = schema_store.user_store(store).resolve()
    if schema_store.is_shipped(root):
        raise UsageError(
            f"{root} holds the pins shipped with the package and is never written: choose "
            f"{schema_store.store_hint().removeprefix('your store: ')}"
        )
    _writable_target(root)
    return root


def generate_both(binary: Path, timeout: float) -> tuple[dict[str, object], dict[str, object]]:
    """The stable and the experimental bundle the binary prints (RuntimeError or SchemaStoreError if it fails)."""
    return generate(binary, False, timeout), generate(binary, True, timeout)


def same_as_pinned(pinned: dict[str, Any], stable: dict[str, object], experimental: dict[str, object]) -> bool:
    """Whether both bundles have the digests a pin's meta (its ``bundles``) records."""
    return all(
        pinned.get(kind, {}).get("sha256") == schema_store.bundle_digest(bundle)
        for kind, bundle in (("stable", stable), ("experimental", experimental))
    )


def generate(binary: Path, experimental: bool, timeout: float) -> dict[str, object]:
    """One bundle from the binary; raises RuntimeError with the binary's own words when it fails.

    Started like every binary (:func:`harness.codex_bin.run_binary`: confined, scrubbed, bounded): it writes
    its files into its own run directory, read from there before the directory is removed.
    """
    with run_dir("codex-schema-") as run:
        out_dir = run.root / "schema"
        argv = [os.fspath(binary), "app-server", "generate-json-schema", "--out", os.fspath(out_dir)]
        if experimental:
            argv.insert(3, "--experimental")
        try:
            done = run_binary(argv, timeout, run=run)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"`{' '.join(argv[1:4])}` did not finish within {timeout:g} s") from None
        except OutputOverflow as exc:
            raise RuntimeError(f"`{' '.join(argv[1:4])}` {exc}") from None
        except (OSError, ConfinementUnavailable) as exc:
            raise UsageError(f"cannot run {binary}: {exc}") from exc
        if done.returncode != 0:
            tail = strip_ansi(done.stderr.decode(errors="replace")).strip()[-400:]
            raise RuntimeError(f"`{' '.join(argv[1:])}` exited {done.returncode}: {tail}")
        return schema_store.read_bundle_dir(out_dir)


def pin_schema(binary: Path, version: str, root: Path) -> tuple[str, dict[str, Any] | None]:
    """Generate both bundles; store them when ``version`` is not pinned yet. Returns (state, stable bundle).

    An already pinned release (shipped with the package, else in ``root``, the user's store) is compared,
    never overwritten (re-pinning is ``schema pin``'s job); a new one goes to ``root``.
    State: ``new``, ``already pinned, identical``, ``already pinned, DIFFERENT …`` or ``failed: …``.
    """
    try:
        stable, experimental = generate_both(binary, GENERATE_TIMEOUT_S)
    except (RuntimeError, schema_store.SchemaStoreError) as exc:
        return f"failed: {exc}", None
    holder = schema_store.SHIPPED_ROOT if version in schema_store.shipped_releases() else root
    if version in schema_store.pinned_releases(holder):
        pinned = schema_store.load_meta(version, holder).get("bundles", {})
        if same_as_pinned(pinned, stable, experimental):
            return "already pinned, identical", stable
        return "already pinned, DIFFERENT from what the binary prints (not overwritten; see `schema pin`)", stable
    produced_by = {
        "binary_version": version,
        "commands": ["generate-json-schema", "generate-json-schema --experimental"],
    }
    try:
        schema_store.write_release(version, stable, experimental, root, produced_by)
    except schema_store.SchemaStoreError as exc:
        return f"failed: {exc}", stable
    return "new", stable
