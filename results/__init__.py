"""Recorded results: the report built from the results store, export and import, and
the results-file formats they use (tau2's Results schema, tau-bench v1's result lists,
passhat's JSON lines).

Below the CLI and beside nothing that runs a trial: the CLI renders and prints what these
modules return, and workflows and activities never import them."""
