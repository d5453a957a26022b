#!/usr/bin/env python3
"""How much code a process runs per request: distinct 64-byte lines and 4 KiB pages of
each object holding instructions run at least MIN times, from a callgrind out file written
with `--dump-instr=yes`.

    CG_ARGS=--dump-instr=yes CASES=enforce CONC=32 bash benches/load/callgrind.sh BIN ...
    python3 benches/load/hotcode.py [--min N] $WORK/callgrind/b1-enforce.out ...

With 3,000 requests, MIN 2900 (the default) keeps the code run about once a request or
more: the request path's footprint in the instruction cache (lines) and in the
instruction TLB (pages). Each FILE's start-up run (callgrind.sh's FILE-startup.out, when
there is one beside it) is subtracted first, so that code run only while starting (an
anchor's, say) is not counted.
"""
import argparse
import collections
import os
import re


def costs(path):
    """Instructions run per (object, address), call lines' inclusive costs left out."""
    names, obj, last, after_call = {}, "?", [0, 0], False
    cost = collections.Counter()
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            m = re.match(r"(c?)ob=(\((\d+)\))?\s*(.*)", line)
            if m:
                key, name = m.group(2), m.group(4)
                if key and name:
                    names[key] = name
                if not m.group(1):
                    obj = names.get(key, name) if key else name
                continue
            if line.startswith("calls="):
                after_call = True
                continue
            head = line.split(" ", 1)[0]
            if "=" in head or not (head[0] in "+-*" or head[0].isdigit()):
                continue
            parts = line.split()
            pos = []
            for i, p in enumerate(parts[:2]):
                if p == "*":
                    pos.append(last[i])
                elif p[0] in "+-":
                    pos.append(last[i] + int(p, 0))
                else:
                    pos.append(int(p, 0))
            last = pos
            if after_call:
                after_call = False
                continue
            if len(parts) > 2:
                cost[obj, pos[0]] += int(parts[2])
    return cost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--min", type=int, default=2900, help="runs an instruction must have (default 2900)")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    for path in args.files:
        run = costs(path)
        startup = path[: -len(".out")] + "-startup.out" if path.endswith(".out") else None
        if startup and os.path.exists(startup):
            run.subtract(costs(startup))
        hot = [(obj, addr) for (obj, addr), n in run.items() if n >= args.min]

        def per_object(shift):
            """Distinct blocks of 2**shift bytes holding hot instructions, per object."""
            return collections.Counter(obj.rsplit("/", 1)[-1] for obj, _ in {(o, a >> shift) for o, a in hot})

        lines, pages = per_object(6), per_object(12)
        print(path)
        for short in sorted(lines, key=lines.get, reverse=True):
            print(f"  {short:32} {lines[short]:6} lines of 64 B  {pages[short]:5} pages of 4 KiB")


if __name__ == "__main__":
    main()
