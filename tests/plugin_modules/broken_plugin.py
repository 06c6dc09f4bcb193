"""A plugin for the tests that fails as it imports."""

raise RuntimeError("the pharmacy backend is not configured\nset PHARMACY_URL first")
