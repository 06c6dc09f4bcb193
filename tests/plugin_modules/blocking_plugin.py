"""A plugin that takes its time to import: it writes the file named by
PASSHAT_TEST_IMPORTING (so a test knows the command is importing it) and then waits,
as a plugin loading a large model or data set would, until the process is interrupted."""

import os
import time
from pathlib import Path

Path(os.environ["PASSHAT_TEST_IMPORTING"]).write_text(str(os.getpid()))
for _ in range(600):
    time.sleep(1)
