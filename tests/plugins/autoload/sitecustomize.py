# Test-only: with this folder and its parent on PYTHONPATH, every Python process (the
# passhat CLI, its workers) imports the test agents at start, as a plugin would be.
import passhat_test_agents  # noqa: F401
