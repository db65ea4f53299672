"""The sandbox: process trees that end whole (proctree), the confined launcher of a real binary (confine,
confine_init), bounded one-shot runs (bounded_run), work directories (workdirs) and the signal path
(interrupts). It depends on contracts only; the client and the harness use it."""
