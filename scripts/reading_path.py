"""The reading path of a command: the project's functions in the order a run first enters them.

Run inside gdb by scripts/reading-path (`gdb -batch -x reading_path.py --args aviary ...`): a
temporary breakpoint at the entry of every function whose source is under the package's
`Sources/` (from the binary's symbols and line table, passed in READING_PATH_MAP as
"address symbol file:line" lines), so that each stops the program once, the first time it is
entered; the files of those first entries, in order, go to READING_PATH_OUT.

Run as a plain script (`python3 reading_path.py count TRACE --until FILE`), it counts the path
as the architecture reviews do: consecutive entries into one file are one visit, the files are
the distinct ones visited, and each later visit to a file already read is one return.
"""
import collections
import os
import sys


def trace():
    import gdb  # only inside gdb

    entries = {}
    with open(os.environ["READING_PATH_MAP"]) as f:
        for line in f:
            address, symbol, location = line.rstrip("\n").split(" ", 2)
            entries[int(address, 16)] = (location.rsplit(":", 1)[0], symbol)
    for setting in ("pagination off", "confirm off", "breakpoint pending off",
                    # A breakpoint removed and put back at every stop would cost thousands of writes each time.
                    "breakpoint always-inserted on"):
        gdb.execute("set " + setting)
    gdb.execute("starti", to_string=True)
    binary = os.path.realpath(os.environ["READING_PATH_BINARY"])
    base = None
    for line in gdb.execute("info proc mappings", to_string=True).splitlines():
        fields = line.split()
        if len(fields) >= 5 and os.path.realpath(fields[-1]) == binary:
            base = int(fields[0], 16)
            break
    if base is None:
        raise SystemExit("reading-path: %s is not mapped in the process" % binary)
    for address in entries:
        gdb.Breakpoint("*%#x" % (base + address), internal=True, temporary=True)
    with open(os.environ["READING_PATH_OUT"], "w") as out:
        while True:
            try:
                gdb.execute("continue", to_string=True)
                pc = gdb.selected_frame().pc()
            except gdb.error:
                break  # the program has exited
            entry = entries.get(pc - base)
            if entry:
                out.write("%s %s\n" % entry)


def count(path, until, sources):
    files = []
    with open(path) as f:
        for line in f:
            file = line.split(" ", 1)[0]
            files.append(os.path.relpath(file, sources) if file.startswith(sources) else file)
            if until and os.path.basename(file) == until:
                break
        else:
            if until:
                raise SystemExit("reading-path: the run never entered %s" % until)
    visits = [file for i, file in enumerate(files) if i == 0 or files[i - 1] != file]
    distinct = list(dict.fromkeys(visits))
    returns = collections.Counter(visits)
    print("functions %d, files %d, visits %d, returns %d" % (len(files), len(distinct), len(visits), len(visits) - len(distinct)))
    print("most returns: " + ", ".join("%s %d" % (os.path.basename(file).removesuffix(".swift"), n - 1)
                                       for file, n in returns.most_common(6)))
    modules = collections.Counter(file.split("/")[0] for file in distinct)
    print("files by module: " + ", ".join("%s %d" % m for m in modules.most_common()))


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "count":
    arguments = sys.argv[2:]
    until = None
    if "--until" in arguments:
        i = arguments.index("--until")
        until = arguments[i + 1]
        del arguments[i:i + 2]
    count(arguments[0], until, arguments[1] if len(arguments) > 1 else os.getcwd() + "/Sources/")
elif __name__ == "__main__":
    trace()
