"""Outside clients and their adapters for ``codex-harness run --client-cmd`` (see docs/clients.md).

- ``careful.py`` / ``careless.py``: two tiny standard-library clients, the reference and the counter-example;
- ``openai_codex_sdk.py``: the adapter of the official Python SDK, run in the SDK's own venv (:mod:`.sdk`);
- ``unofficial_sdk_adapter.py``, ``app_server_client_adapter.py``: adapters of third-party app-server clients from
  PyPI (``pypi.json``), each run in its own venv (:mod:`.pypi`).
"""
