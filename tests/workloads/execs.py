"""A CPU-bound thread shares the GIL with the main thread; after SECONDS the process exec()s /bin/sleep (the
pid lives on, running another program).

usage: execs.py SECONDS
"""
import os
import sys
import threading
import time

from common import announce, native_id, seconds_arg, spin_until

delay = seconds_arg(sys.argv, 1.0)
threading.Thread(target=spin_until, args=(time.monotonic() + 3600,), daemon=True).start()
announce({"main": native_id()})
time.sleep(delay)
os.execv("/bin/sleep", ["sleep", "30"])
