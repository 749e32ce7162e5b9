#!/usr/bin/env python3
"""Fails (exit 1, one line per offence) when a source file includes a header from a floor above its own.

The floors and what each may use directly are declared here, once; what a floor may include is everything it
reaches through them. A file belongs to the deepest floor whose folder holds it. Run by the build (target
check_layers, part of ALL), so an upward include fails the build as a link to an upper library would.
"""
import pathlib
import re
import sys

USES = {
    "base": [],
    "elfutils": ["base"],
    "cpython_layouts": ["elfutils"],
    "raw": ["base"],
    "convert": ["raw"],
    "sampler/proc": ["cpython_layouts"],
    "sampler/remote": ["base"],
    "sampler/queue": ["raw"],
    "sampler/schedule": ["base"],
    "sampler/target": ["sampler/proc", "sampler/remote", "cpython_layouts"],
    "sampler/gc": ["sampler/target", "sampler/queue"],
    "sampler/stacks": ["sampler/target", "sampler/queue"],
    "sampler/counters": ["sampler/proc", "sampler/queue"],
    "sampler/exact": ["elfutils"],
    "sampler/gil": ["sampler/gc", "sampler/stacks", "sampler/counters", "sampler/schedule", "sampler/exact"],
    "sampler/loop": ["sampler/gil"],
    "sampler/native": ["elfutils"],
    "cli/top": ["raw"],
    "cli": ["sampler/loop", "sampler/native", "convert", "cli/top"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def reachable(floor, seen=None):
    seen = set() if seen is None else seen
    for lower in USES[floor]:
        if lower not in seen:
            seen.add(lower)
            reachable(lower, seen)
    return seen | {floor}


def floor_of(path):
    """The deepest declared floor that holds `path` (a path relative to the root), or None."""
    best = None
    for floor in USES:
        if (path + "/").startswith(floor + "/") and (best is None or len(floor) > len(best)):
            best = floor
    return best


def offences(root):
    for floor in USES:
        allowed = reachable(floor)
        for source in sorted((root / floor).glob("*.[ch]pp")):
            for header in INCLUDE.findall(source.read_text(errors="replace")):
                target = floor_of(header)
                if target is not None and target not in allowed:
                    yield f"{source.relative_to(root)}: includes {header} ({target} is not below {floor})"


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = list(offences(root))
    for line in found:
        print(f"layers: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
