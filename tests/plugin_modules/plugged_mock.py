"""A plugin for the tests: registers tau2's mock domain again under the name "plugged",
through passhat's own registry."""

from passhat.domains import register_domain
from passhat.domains.tau2_domain import Tau2Domain

register_domain("plugged", lambda: Tau2Domain("mock", label="plugged"))
