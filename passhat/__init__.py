"""passhat: durable pass^k evaluation of tool-using AI agents on tau2 benchmarks.

The distribution installs one import package. Its subpackages live in the repository's
top-level folders (setuptools package-dir mapping): passhat.cli, passhat.workflows,
passhat.activities, passhat.domains, passhat.infra, and passhat.testing (the loopback
model servers and process harness that the tests and benchmarks share). The contracts
every layer shares are in passhat.contracts; the estimators in passhat.metrics.
"""

__version__ = "0.1.0"
