"""Line-table fixtures from a real interpreter: for every code object of SAMPLE (a module with the shapes that
stress a line table: a 30-line body, a jump of more than 127 lines, lines going backwards, multi-line
expressions, nested functions, lambdas, generators, comprehensions, coroutines, a class), its table's bytes and
the line CPython itself gives each instruction. Run as `python3.X line_table_fixtures.py`: one JSON object on
stdout. tests/unit/test_line_table.cpp runs it with every interpreter it finds and decodes the tables with
cpython_layouts/line_table.cpp; tests/data/line_tables.json holds one run per version, made with
`python3.X tests/data/line_table_fixtures.py --small` (the first few code objects only)."""
import dis
import json
import sys
import types

SAMPLE = '''
import asyncio

def thirty(n):
    a = 0
    b = 1
    c = 2
    d = 3
    e = 4
    f = 5
    g = 6
    h = 7
    i = 8
    j = 9
    k = 10
    l = 11
    m = 12
    o = 13
    p = 14
    q = 15
    r = 16
    s = 17
    t = 18
    u = 19
    v = 20
    w = 21
    x = 22
    y = 23
    z = 24
    a += n
    b += a
    return a + b + c + d + e + f + g + h + i + j + k + l + m + o + p + q + r + s + t + u + v + w + x + y + z

def jumps(x):
    if x:
        y = (x +
             1 +
             2)
        return [v * 2
                for v in range(y)
                if v % 2]
''' + "\n" * 150 + '''
    return lambda q: (q,
                      x)

def gen(n):
    for i in range(n):
        yield i
    def inner():
        return n
    return inner

async def coro(n):
    await asyncio.sleep(0)
    return n

class Box:
    def method(self, v):
        while v > 0:
            v -= 1
        return v
'''


def expected_lines(code):
    """The line of each 2-byte unit (3.10+) or byte (3.8-3.9) address, as CPython computes it."""
    n = len(code.co_code)
    lines = [None] * n
    if sys.version_info >= (3, 10):
        for start, end, line in code.co_lines():
            for a in range(start, min(end, n)):
                lines[a] = -1 if line is None else line
        return lines[::2]  # per code unit
    starts = list(dis.findlinestarts(code))
    line = code.co_firstlineno
    k = 0
    for a in range(n):
        while k < len(starts) and starts[k][0] <= a:
            line = starts[k][1]
            k += 1
        lines[a] = line
    return lines


def walk(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from walk(c)


def main():
    small = "--small" in sys.argv
    top = compile(SAMPLE, "sample.py", "exec")
    out = []
    for code in walk(top):
        table = code.co_lnotab if sys.version_info < (3, 10) else code.co_linetable
        out.append({"name": getattr(code, "co_qualname", code.co_name), "first_line": code.co_firstlineno,
                    "table": table.hex(), "unit": 1 if sys.version_info < (3, 10) else 2,
                    "lines": expected_lines(code)})
    if small:
        out = [c for c in out if c["name"] in ("thirty", "jumps", "Box.method", "method")]
    json.dump({"version": "%d.%d.%d" % sys.version_info[:3], "code": out}, sys.stdout)


if __name__ == "__main__":
    main()
