"""Outside clients and their adapters for ``codex-harness run --client-cmd`` (see docs/clients.md).

- ``careful.py`` / ``careless.py``: two tiny standard-library clients, the reference and the counter-example;
- ``openai_codex_sdk.py``: the adapter of the official Python SDK, run in the SDK's own venv (:mod:`.sdk`).
"""
