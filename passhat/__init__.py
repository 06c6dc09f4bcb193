"""passhat: durable pass^k evaluation of tool-using AI agents on tau2 benchmarks.

The distribution installs one import package. Its subpackages live in the repository's
top-level folders (setuptools package-dir mapping): passhat.cli, passhat.workflows,
passhat.activities, passhat.domains, passhat.infra, and passhat.testing (the loopback
model servers and process harness that the tests and benchmarks share). The contracts
every layer shares are in passhat.contracts; the estimators in passhat.metrics.
"""


import os

# litellm (passhat.infra.llm's, and tau2's) downloads a model price list at import unless
# told to use its bundled copy, and there may be no network. Every passhat module is
# imported through this package, so this holds before either loads; a value the user
# set wins.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
