"""Code only the tests and the benchmarks use, kept out of the package: the fake's engine on a virtual clock
without trio (:mod:`support.virtual`), transcript replay (:mod:`support.replay`), a plan player on raw frames
(:mod:`support.plan`), headless Chromium for the HTML report (:mod:`support.browser`),
and where the repository and the tests' data are (:mod:`support.paths`).

Tests import it as ``support`` (pytest puts ``tests/`` on ``sys.path``); a benchmark puts ``tests/`` there too.
"""
