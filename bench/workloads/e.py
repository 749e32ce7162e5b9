"""Workload (e): see gilwork.py. usage: python e.py SECONDS [--progress SECONDS]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gilwork  # noqa: E402

if __name__ == "__main__":
    gilwork.main(sys.argv, "e")
