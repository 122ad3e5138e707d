#!/usr/bin/env python3
"""Records real worker replies as seeds of fuzz_worker_reply (corpus/worker_reply).

Runs `ropecheck validate` under strace on example plugins and keeps, per plugin, the smallest
message of each reply type from the worker processes (not the host), and the smallest apply()
reply carrying a guard's fault, as [kind u8][result_bytes u32][message].
  python3 src/fuzz/make_worker_reply_seeds.py BUILD_DIR
"""
import os
import re
import struct
import subprocess
import sys

build = sys.argv[1]
rc = os.path.join(build, "ropecheck")
out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "worker_reply")
runs = {
    "correct": ["c_correct", "--properties", "PreservesNorm"],
    "unwritten": ["c_hostile_unwritten", "--properties", "PassThroughIsExact"],
    "scalar": ["builtin_scalar", "--properties", "PreservesNorm", "--layouts", "half"],
}
LINE = re.compile(r'^(\d+)\s+writev\(\d+, \[(.*)\], \d+\) = \d+')
IOV = re.compile(r'\{iov_base="((?:\\x[0-9a-f]{2})*)"')


def unhex(s):
    return bytes(int(h, 16) for h in s.split("\\x")[1:])


for tag, (plugin, *opts) in runs.items():
    so = os.path.join(build, "plugins", "libropecheck_plugin_" + plugin + ".so")
    cmd = ["strace", "-f", "-qq", "-e", "trace=writev", "-xx", "-s", "1000000", "-o",
           "/tmp/worker_reply.strace", rc, "validate", "--plugin", so, "--dtypes", "f32",
           "--budget", "quick", "--threads", "1"] + opts
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lines = [m for m in map(LINE.match, open("/tmp/worker_reply.strace")) if m]
    host = min(int(m.group(1)) for m in lines)  # the workers are forked after it
    best = {}
    for m in lines:
        if int(m.group(1)) == host:
            continue
        msg = b"".join(unhex(v) for v in IOV.findall(m.group(2)))
        if len(msg) < 16:
            continue
        typ, _id, length = struct.unpack("<IIQ", msg[:16])
        kind = {1: 0, 3: 1, 4: 2}.get(typ)
        if kind is None:
            continue
        name = "%s_type%d" % (tag, typ)
        if typ == 4 and struct.unpack("<i", msg[20:24])[0] != 0:
            name += "_fault"
        if name not in best or len(msg) < len(best[name][1]):
            result_bytes = struct.unpack("<Q", msg[32:40])[0] if typ == 4 else 0
            best[name] = (kind, msg, result_bytes)
    for name, (kind, msg, result_bytes) in best.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(bytes([kind]) + struct.pack("<I", result_bytes) + msg)
