"""Sleeps; a target for error-path tests (works on any Python, even ones gilspy refuses)."""
import sys
import time

time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 60)
