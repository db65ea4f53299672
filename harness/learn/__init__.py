"""Learning a release from its binary: :mod:`harness.learn.learner` (the steps), :mod:`harness.learn.sessions`
(the sessions played on it), :mod:`harness.learn.fit` (the fake fitted to them), :mod:`harness.learn.derive`
(what the recordings say, pure)."""
