"""The codex-harness pytest suite and plugin; ``assert_passed`` fails a test with a judged run's failures."""

from conformance.assertions import assert_passed, failure_message

__all__ = ["assert_passed", "failure_message"]
