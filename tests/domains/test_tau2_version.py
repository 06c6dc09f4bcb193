"""Which tau2 passhat runs on, and the rules table keyed by version."""

from __future__ import annotations

import pytest

from passhat.domains.tau2_version import (
    RULES,
    UnknownTau2VersionError,
    data_digest,
    family_of,
    installed_family,
    rules_for,
)


def test_versions_map_to_their_rules():
    assert family_of("26.3") == family_of("26.3.0") == "26.3"
    assert family_of("1.0.0") == family_of("1.0.1") == "1.0"
    # A run recorded before passhat kept the version ran on 26.3.
    assert rules_for(None) is RULES["26.3"]
    assert rules_for("1.0.1").on_model_failure == "rerun"
    assert rules_for("26.3").on_model_failure == "agent_error"
    assert installed_family() in RULES


@pytest.mark.parametrize("version", ["0.2.1", "1.1.0", "27.0"])
def test_an_unknown_version_is_refused_in_one_line(version):
    with pytest.raises(UnknownTau2VersionError) as err:
        rules_for(version)
    message = str(err.value)
    assert "\n" not in message and version in message and "1.0.x" in message


def test_data_digest_names_the_data_a_run_measured():
    both = data_digest(["airline", "mock"])
    assert both is not None and both == data_digest(["mock", "airline"])
    assert both != data_digest(["mock"])
    assert data_digest(["a_plugin_domain_with_no_tau2_data"]) is None
