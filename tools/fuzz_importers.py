"""Fuzz the model importers: mutate real files, load and pose each in a limited child, count outcomes.

Usage (from the repository root; writes only under --out, default /tmp/fuzz_importers):

    python3 tools/fuzz_importers.py --format gltf --cases 3000            # glTF/GLB/VRM seeds
    python3 tools/fuzz_importers.py --format assimp --cases 800           # the Assimp bridge's formats
    python3 tools/fuzz_importers.py --format gltf --cases 200 --seed 7 --mem-gb 2 --timeout 10
    python3 tools/fuzz_importers.py --replay CASE_FILE [CASE_FILE ...]    # rerun saved cases the same way
    python3 tools/fuzz_importers.py --format gltf --case 123 --seed 1     # regenerate and run one case

Seeds: --assets (default $MMDKIT_ASSETS or ../shared/assets): gltf/ and rigs/ (.glb .gltf .vrm .vrma,
read as .glb) for gltf; assimp/models/ files with an extension mmdkit registers for Assimp for assimp.
Case k of --seed s is always the same file (random.Random(f"{s}:{k}")), so --case k reproduces it.
Mutations: byte flips/overwrites/truncation/insertion; for glTF also JSON value mutations (huge,
negative, NaN/inf, 5000-digit numbers, wrong types, deleted keys, deep nesting, bad URIs, node and
list bombs) and float overwrites inside accessor data (key times, positions); for text formats
number replacements and line duplication.

Each case runs in a child forked from this process (mmdkit imported and its kernels warmed once,
NUMBA_NUM_THREADS=1), with RLIMIT_AS = this process's size + --mem-gb and a wall-clock --timeout:
``mmdkit.load`` + finiteness of the model's arrays + posing frames 0, 1 and the last of up to two
clips with skinned vertices. Outcome classes: ok, error (an MmdkitError on one line), badmsg (an
MmdkitError over several lines), traceback (any other exception), nan (non-finite model or pose
output), memory (MemoryError under the limit), big (peak RSS grew by more than 1 GiB from a file under
1 MiB), hang (killed at --timeout), crash (killed by a signal or died without a result). Failing
cases are copied to OUT/fail/<class>/; every result is a line of OUT/results.jsonl; a table is printed.
``run(fmt, cases, seed, ...)`` does the same from Python (tests use a small seeded run).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import struct
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")  # one core per case; forked children never inherit pools
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")  # GNU OpenMP's runtime refuses to run after fork

REPO = Path(__file__).resolve().parents[1]
FAILURES = ("traceback", "hang", "crash", "nan", "memory", "big", "badmsg")
CLASSES = ("ok", "error") + FAILURES
GLTF_EXT = {".glb": ".glb", ".gltf": ".gltf", ".vrm": ".glb", ".vrma": ".glb"}
HUGE = [1e300, -1e300, 1e39, -1e39, 3.4e38, -3.4e38, 1e9, 2e4, 2**63, 2**40, 2**32, 2**31, -1, -2**31, 0,
        1.5, 1e-45, 65535, 100000]
SPECIAL = [float("nan"), float("inf"), float("-inf")]
FLOATS = [1e9, 2e4, 3.4e38, -3.4e38, 1e30, -1e30, 1e-40, 0.0, -0.0, 1e6, float("nan"), float("inf")]
URIS = ["ok%00.bin", "../x.bin", "/etc/passwd", "http://example.com/a.bin", "fifo.bin", "data:,", "data:x;base64,!!",
        "a\nb.bin", "missing.bin", "%2e%2e/x.bin", "."]


# ----------------------------------------------------------------------------------------- seeds
def assets_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get("MMDKIT_ASSETS") or REPO.parent / "shared" / "assets")


def seed_files(fmt: str, assets: Path) -> list[tuple[Path, str]]:
    """(seed file, extension the mutated case is written with), sorted for reproducible cases."""
    out = []
    if fmt == "gltf":
        for folder in (assets / "gltf", assets / "rigs"):
            for p in sorted(folder.rglob("*")):
                if p.is_file() and p.suffix.lower() in GLTF_EXT:
                    out.append((p, GLTF_EXT[p.suffix.lower()]))
    else:
        from mmdkit.formats import ASSIMP_EXTENSIONS

        for p in sorted((assets / "assimp" / "models").rglob("*")):
            if p.is_file() and p.suffix.lower() in ASSIMP_EXTENSIONS and p.stat().st_size < 4 << 20:
                out.append((p, p.suffix))
    if not out:
        sys.exit(f"fuzz_importers: no {fmt} seed files under {assets} (set --assets or MMDKIT_ASSETS)")
    return out


# ------------------------------------------------------------------------------------- mutations
def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One byte-level change: flips, interesting integers, truncation, insertion, duplication, zeroing."""
    b = bytearray(data)
    if not b:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    kind = rng.randrange(6)
    if kind == 0:
        for _ in range(rng.randint(1, 16)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        at = rng.randrange(len(b))
        b[at:at + 4] = struct.pack("<I", rng.choice([0, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 12, 20, 0xFFFF]))
    elif kind == 2:
        del b[rng.randrange(len(b)):]
    elif kind == 3:
        at = rng.randrange(len(b) + 1)
        b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
    elif kind == 4:
        at = rng.randrange(len(b))
        b[at:at] = b[at:at + rng.randint(1, 4096)] * rng.randint(2, 8)
    else:
        at = rng.randrange(len(b))
        b[at:at + rng.randint(1, 256)] = b"\0" * min(256, len(b) - at)
    return bytes(b)


def _paths(doc, prefix=()):
    """Every (container, key) of the JSON tree, with the key path, for picking a random spot."""
    stack = [(doc, prefix)]
    while stack:
        node, path = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            yield node, k, path + (k,)
            if isinstance(v, (dict, list)) and len(path) < 12:
                stack.append((v, path + (k,)))


def _value(rng: random.Random, old):
    """A replacement for a JSON value: a huge/special number, another type, a bad URI, deep nesting."""
    r = rng.random()
    if r < 0.45:
        v = rng.choice(HUGE + (SPECIAL if rng.random() < 0.2 else []))
        return [v] * len(old) if isinstance(old, list) and old and rng.random() < 0.5 else v
    if r < 0.55:
        return _BIG_INT if rng.random() < 0.5 else _NESTED  # spliced in as text by _dumps
    if r < 0.65:
        return rng.choice(URIS)
    if r < 0.85:
        return rng.choice(["", "x", None, True, [], {}, [None], {"a": 1}, [1e300] * 16, list(range(40))])
    if isinstance(old, (int, float)) and not isinstance(old, bool):
        return old * rng.choice([-1, 2, 1000, 1e6]) + rng.choice([0, 1, -1])
    return rng.choice(HUGE)


_CORE = ("accessors", "bufferViews", "nodes", "animations", "skins", "meshes", "buffers", "scenes")
_ADDED = [("sparse", lambda rng, n: {"count": rng.choice([1, 3, 10**6]), "indices": {"bufferView": rng.randrange(4),
                                                                              "componentType": rng.choice([5121, 5123, 5125, 5126])},
                                   "values": {"bufferView": rng.randrange(4)}}),
          ("matrix", lambda rng, n: [rng.choice([0, 1, 1e6, 1e-30, -1]) for _ in range(16)]),
          ("byteStride", lambda rng, n: rng.choice([4, 8, 252, 256, 3, 0])),
          ("normalized", True), ("mode", lambda rng, n: rng.choice([0, 1, 3, 5, 6, 7])),
          ("weights", lambda rng, n: [1e6] * rng.choice([0, 1, 8, 1000])),
          ("skin", lambda rng, n: rng.choice([0, 1, 99])), ("mesh", lambda rng, n: rng.choice([0, 1, 99])),
          ("children", lambda rng, n: [rng.randrange(max(1, n))] * rng.choice([1, 2])),
          ("count", lambda rng, n: rng.choice([1, 2, 10**6, 5_600_000, 2**31])),
          ("byteOffset", lambda rng, n: rng.choice([1, 2, 3, 4, 2**31, 2**40])),
          ("bufferView", lambda rng, n: rng.choice([0, 1, 2, 9999])),
          ("targets", lambda rng, n: [{"POSITION": rng.randrange(max(1, n))}] * rng.choice([1, 10, 5000])),
          ("scale", lambda rng, n: [rng.choice([0, 1e5, 1e-5, -1, 1e6])] * 3),
          ("rotation", lambda rng, n: [rng.choice([0, 1e300, 1e-300, 1e30])] * 4)]


def mutate_json(doc: dict, rng: random.Random) -> dict:
    """One JSON change: set a random value, delete a key, grow a list, or add a node/child bomb."""
    spots = list(_paths(doc))
    r = rng.random()
    if r < 0.04 and isinstance(doc.get("nodes"), list):  # 10^4..10^5 extra nodes
        n = rng.choice([10_000, 100_000])
        doc["nodes"].extend({} for _ in range(n))
        if rng.random() < 0.5 and doc["nodes"]:
            doc["nodes"][0]["children"] = doc["nodes"][0].get("children", []) + list(
                range(len(doc["nodes"]) - n, len(doc["nodes"])))
        return doc
    if r < 0.07 and isinstance(doc.get("nodes"), list) and len(doc["nodes"]) > 1:  # a long chain
        start = len(doc["nodes"])
        doc["nodes"].extend({"children": [start + i + 1]} for i in range(rng.choice([2000, 20000])))
        doc["nodes"][-1].pop("children")
        return doc
    if not spots:
        return doc
    core = [x for x in spots if x[2][0] in _CORE]
    if r < 0.40 and isinstance(doc.get("accessors"), list) and doc["accessors"]:  # add a key where it matters
        where = rng.choice([k for k in _CORE if isinstance(doc.get(k), list) and doc[k]] or ["accessors"])
        obj = rng.choice(doc[where])
        if isinstance(obj, dict):
            key, value = rng.choice(_ADDED)
            obj[key] = value(rng, len(doc["accessors"])) if callable(value) else value
        return doc
    node, key, _ = rng.choice(core if core and rng.random() < 0.7 else spots)
    if r < 0.22 and isinstance(node, dict):
        del node[key]
    elif r < 0.30 and isinstance(node[key], list) and node[key]:
        node[key] = node[key] * rng.choice([2, 10, 1000])
    else:
        node[key] = _value(rng, node[key])
    return doc


_BIG_INT, _NESTED = "@@big-int@@", "@@nested@@"


def _dumps(doc) -> bytes:
    text = json.dumps(doc, allow_nan=True)
    text = text.replace(f'"{_BIG_INT}"', "1" + "0" * 5000)
    return text.replace(f'"{_NESTED}"', "[" * 100_000 + "]" * 100_000).encode()


def split_gltf(data: bytes):
    """(json dict, bin bytes or None, is_glb) of a GLB or .gltf; None when it does not parse."""
    try:
        if data[:4] == b"glTF":
            n = struct.unpack_from("<I", data, 12)[0]
            doc = json.loads(data[20:20 + n])
            rest = data[20 + n:]
            bin_ = rest[8:8 + struct.unpack_from("<I", rest, 0)[0]] if len(rest) >= 8 else None
        else:
            doc, bin_ = json.loads(data), None
        return (doc, bin_, data[:4] == b"glTF") if isinstance(doc, dict) else None
    except (ValueError, struct.error, RecursionError):
        return None


def join_gltf(doc, bin_: bytes | None, glb: bool) -> bytes:
    j = _dumps(doc)
    if not glb:
        return j
    j += b" " * (-len(j) % 4)
    body = struct.pack("<II", len(j), 0x4E4F534A) + j
    if bin_ is not None:
        bin_ += b"\0" * (-len(bin_) % 4)
        body += struct.pack("<II", len(bin_), 0x004E4942) + bin_
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


def mutate_floats(doc: dict, bin_: bytes | None, rng: random.Random):
    """Overwrite elements of a float accessor (GLB BIN or buffers[0] data: URI) with special floats."""
    raw, uri = bin_, None
    bufs = doc.get("buffers") or [{}]
    if raw is None and isinstance(bufs[0], dict) and str(bufs[0].get("uri", "")).startswith("data:"):
        uri = bufs[0]["uri"]
        raw = base64.b64decode(uri.split(",", 1)[1])
    try:
        accs = [a for a in doc.get("accessors", []) if isinstance(a, dict) and a.get("componentType") == 5126
                and isinstance(a.get("bufferView"), int)]
        keyed = [doc["accessors"][s.get("input")] for an in doc.get("animations", []) for s in an.get("samplers", [])]
        keyed = [a for a in keyed if isinstance(a, dict) and a in accs]
        if raw is None or not accs:
            return doc, bin_
        a = rng.choice(keyed if keyed and rng.random() < 0.5 else accs)  # key times: half the time
        bv = doc["bufferViews"][a["bufferView"]]
        start = bv.get("byteOffset", 0) + a.get("byteOffset", 0)
        stride = bv.get("byteStride") or 4 * {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}.get(a["type"], 1)
        b = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            at = start + stride * rng.randrange(a["count"]) + 4 * rng.randrange(max(1, stride // 4))
            struct.pack_into("<f", b, at, rng.choice(FLOATS))
            if "max" in a and rng.random() < 0.5:
                a["max"] = [3.4e38] * len(a["max"])
    except (KeyError, IndexError, TypeError, AttributeError, struct.error, ValueError, OverflowError):
        return doc, bin_  # an earlier mutation broke the structure this one needs
    if uri is not None:
        bufs[0]["uri"] = uri.split(",", 1)[0] + "," + base64.b64encode(bytes(b)).decode()
        return doc, bin_
    return doc, bytes(b)


def mutate_text(data: bytes, rng: random.Random) -> bytes:
    """Text formats: replace numbers with huge/odd ones, duplicate or drop lines, insert a NUL."""
    lines = data.split(b"\n")
    nums = [m for m in re.finditer(rb"-?\d+(\.\d+)?(e-?\d+)?", data[:1 << 20])]
    r = rng.random()
    if r < 0.6 and nums:
        out = data
        for m in sorted(rng.sample(nums, min(len(nums), rng.randint(1, 4))), key=lambda m: -m.start()):
            v = rng.choice([b"1e300", b"-1e39", b"nan", b"inf", b"99999999999", b"-1", b"0", b"4294967295", b"x",
                            b"1" + b"0" * 400])
            out = out[:m.start()] + v + out[m.end():]
        return out
    if r < 0.8 and len(lines) > 2:
        i = rng.randrange(len(lines))
        lines[i:i] = [lines[i]] * rng.choice([1, 10, 1000])
    elif len(lines) > 2:
        del lines[rng.randrange(len(lines))]
    else:
        at = rng.randrange(len(data) + 1)
        return data[:at] + b"\0" + data[at:]
    return b"\n".join(lines)


def make_case(fmt: str, seeds, seed: int, k: int) -> tuple[bytes, str, str]:
    """(bytes, extension, description) of case ``k``: 1-3 mutations of one seed file."""
    rng = random.Random(f"{seed}:{k}")
    src, ext = seeds[rng.randrange(len(seeds))]
    data = src.read_bytes()
    kinds = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        parsed = split_gltf(data) if fmt == "gltf" else None
        r = rng.random()
        if parsed is not None and r < 0.6:
            doc, bin_, glb = parsed
            doc = mutate_json(doc, rng)
            data, kind = join_gltf(doc, bin_, glb), "json"
        elif parsed is not None and r < 0.8:
            doc, bin_, glb = parsed
            doc, bin_ = mutate_floats(doc, bin_, rng)
            data, kind = join_gltf(doc, bin_, glb), "floats"
        elif fmt == "assimp" and r < 0.5 and b"\0" not in data[:4096]:
            data, kind = mutate_text(data, rng), "text"
        else:
            data, kind = mutate_bytes(data, rng), "bytes"
        kinds.append(kind)
    return data, ext, f"{src.name}:{'+'.join(kinds)}"


# ------------------------------------------------------------------------------------ the child
def _finite_model(model) -> bool:
    import numpy as np

    for name in ("vertex_position", "vertex_normal", "bone_position", "morph_vertex_offset"):
        a = getattr(model, name, None)
        if a is not None and np.asarray(a).dtype.kind == "f" and not np.isfinite(a).all():
            return False
    return True


def exercise(path: str, frames: int = 3) -> dict:
    """Load ``path`` with ``mmdkit.load``, check the model is finite and pose up to two clips
    (frames 0, 1 and the last) with vertices. Returns {'cls', 'msg'}; runs in the child."""
    import warnings

    import numpy as np

    import mmdkit
    from mmdkit.errors import MmdkitError

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            obj = mmdkit.load(path)
            if not isinstance(obj, mmdkit.Model):
                return {"cls": "ok", "msg": type(obj).__name__}
            if not _finite_model(obj):
                return {"cls": "nan", "msg": "non-finite model arrays"}
            from mmdkit.importers import clips_of
            from mmdkit.runtime import pose

            clips = clips_of(obj)
            for name in list(clips.names)[:2]:
                motion = clips[name]
                wanted = sorted({0.0, 1.0, float(motion.last_frame)})[:frames]
                out = pose(obj, motion, wanted, vertices=obj.num_vertices > 0)
                if not all(np.isfinite(v).all() for v in out.values() if v.dtype.kind == "f"):
                    return {"cls": "nan", "msg": f"non-finite pose of clip {name!r}"}
            cls = "ok"
            msg = f"{obj.num_bones} bones, {obj.num_vertices} vertices, {len(clips)} clips"
        except MemoryError:
            tb = traceback.extract_tb(sys.exc_info()[2])[-1]
            return {"cls": "memory", "msg": f"MemoryError at {Path(tb.filename).name}:{tb.lineno} {tb.name}"}
        except MmdkitError as e:
            text = str(e)
            return {"cls": "badmsg" if "\n" in text or not text else "error", "msg": text[:300]}
        except Exception as e:  # noqa: BLE001 - every other exception is what the fuzz looks for
            tb = traceback.extract_tb(e.__traceback__)[-1]
            return {"cls": "traceback", "msg": f"{type(e).__name__}: {str(e)[:160]} at "
                                               f"{Path(tb.filename).name}:{tb.lineno} {tb.name}"}
    noisy = [str(w.message)[:80] for w in caught if issubclass(w.category, RuntimeWarning)]
    return {"cls": cls, "msg": msg + (f"; RuntimeWarning {noisy[0]}" if noisy else "")}


def _status(field: str) -> int:
    """A size from /proc/self/status in bytes ('VmSize', 'VmRSS', 'VmHWM'); 0 where unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _vm_size() -> int:
    return _status("VmSize")


def _reset_peak() -> int:
    """Start counting this process's peak RSS afresh (a forked child inherits its parent's);
    returns the RSS now, from which the peak's growth is measured."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _status("VmRSS")


def run_child(path: str, mem: int, timeout: float) -> dict:
    """Fork, limit the child's address space to this process's + ``mem`` bytes, run ``exercise``;
    classify by what came back (or did not) within ``timeout`` seconds. Adds 'peak' (RSS growth, bytes)."""
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    limit = _vm_size() + mem
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(rfd)
            os.setpgid(0, 0)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            start = _reset_peak()
            res = exercise(path)
            res["peak"] = max(0, _status("VmHWM") - start)
            os.write(wfd, json.dumps(res).encode())
        except BaseException:  # noqa: BLE001 - the child must end here whatever happens
            code = 3
        finally:
            os._exit(code)
    os.close(wfd)
    t0, chunks, res = time.monotonic(), [], None
    while True:
        left = timeout - (time.monotonic() - t0)
        ready = select.select([rfd], [], [], max(0.0, left))[0] if left > 0 else []
        if not ready:
            os.killpg(pid, signal.SIGKILL)
            res = {"cls": "hang", "msg": f"no result in {timeout:g} s"}
            break
        b = os.read(rfd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(rfd)
    _, status, usage = os.wait4(pid, 0)
    try:
        os.killpg(pid, signal.SIGKILL)  # grandchildren (an Assimp worker) must not outlive the case
    except (ProcessLookupError, PermissionError):
        pass
    if res is None:
        if chunks:
            res = json.loads(b"".join(chunks))
        elif os.WIFSIGNALED(status):
            res = {"cls": "crash", "msg": f"killed by {signal.Signals(os.WTERMSIG(status)).name}"}
        else:
            res = {"cls": "crash", "msg": f"died without a result (exit {os.WEXITSTATUS(status)})"}
    res.setdefault("peak", max(0, usage.ru_maxrss * 1024 - base_rss))  # a child that died: a lower bound
    res["seconds"] = round(time.monotonic() - t0, 3)
    return res


# ---------------------------------------------------------------------------------------- driver
def warm_up(fmt: str, seeds) -> None:
    """Import and compile once here so every forked child starts warm (first real seed of ``fmt``)."""
    for src, _ in seeds[:3]:
        exercise(str(src))


def run(fmt: str, cases: int, seed: int = 1, *, assets=None, out="/tmp/fuzz_importers", mem_gb: float = 2.0,
        timeout: float = 10.0, only: list[int] | None = None, verbose: bool = False) -> Counter:
    """Run ``cases`` mutated cases (or the case numbers ``only``); returns a Counter of classes."""
    seeds = seed_files(fmt, assets_dir(assets))
    out = Path(out)
    (out / "cases").mkdir(parents=True, exist_ok=True)
    warm_up(fmt, seeds)
    counts, by_seed, examples = Counter(), {}, {}
    with open(out / "results.jsonl", "w") as log:
        for k in (only if only is not None else range(cases)):
            data, ext, what = make_case(fmt, seeds, seed, k)
            res = _run_one(out, f"{fmt[0]}{k:06d}{ext}", data, mem_gb, timeout)
            res.update(case=k, what=what, size=len(data))
            counts[res["cls"]] += 1
            by_seed.setdefault(what.split(":")[0], Counter())[res["cls"]] += 1
            if res["cls"] in FAILURES:
                examples.setdefault(res["cls"], []).append(res)
            log.write(json.dumps(res) + "\n")
            if verbose or res["cls"] in FAILURES:
                print(f"case {k} {res['cls']:9s} {what} {res['msg'][:200]}", flush=True)
    print_table(counts, by_seed, examples, cases if only is None else len(only))
    return counts


def _run_one(out: Path, name: str, data: bytes, mem_gb: float, timeout: float) -> dict:
    case = out / "cases" / name
    case.write_bytes(data)
    if name.endswith(".gltf") and not (out / "cases" / "fifo.bin").exists():
        os.mkfifo(out / "cases" / "fifo.bin")  # a URI naming a FIFO must be refused, not block
    res = run_child(str(case), int(mem_gb * (1 << 30)), timeout)
    if res["cls"] == "ok" or res["cls"] == "error":
        if res["peak"] > 1 << 30 and len(data) < 1 << 20:
            res["cls"], res["msg"] = "big", f"peak RSS +{res['peak'] >> 20} MiB from {len(data)} bytes; " + res["msg"]
    if res["cls"] in FAILURES:
        (out / "fail" / res["cls"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(case, out / "fail" / res["cls"] / name)
    case.unlink()
    res["file"] = str(out / "fail" / res["cls"] / name) if res["cls"] in FAILURES else ""
    return res


def print_table(counts: Counter, by_seed: dict, examples: dict, total: int) -> None:
    cols = [c for c in CLASSES if c in ("ok", "error") or counts[c] or c in FAILURES]
    print(f"\n{'seed':34s} " + " ".join(f"{c:>9s}" for c in cols))
    for s in sorted(by_seed):
        print(f"{s[:34]:34s} " + " ".join(f"{by_seed[s][c]:9d}" for c in cols))
    print(f"{'total (' + str(total) + ' cases)':34s} " + " ".join(f"{counts[c]:9d}" for c in cols))
    for cls, rows in examples.items():
        print(f"\n{cls}: {len(rows)}")
        for r in rows[:8]:
            print(f"  case {r['case']} {r['what']} ({r['size']} B) {r['msg'][:160]}  {r['file']}")


def replay(files: list[str], mem_gb: float, timeout: float) -> None:
    for f in files:
        res = run_child(os.path.abspath(f), int(mem_gb * (1 << 30)), timeout)
        print(f"{f}: {res['cls']} (+{res['peak'] >> 20} MiB, {res['seconds']} s) {res['msg']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--format", choices=("gltf", "assimp"), default="gltf")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--case", type=int, action="append", help="run only these case numbers (repeatable)")
    ap.add_argument("--assets", default=None)
    ap.add_argument("--out", default="/tmp/fuzz_importers")
    ap.add_argument("--mem-gb", type=float, default=2.0, help="address-space limit per case above this process's")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per case before it counts as a hang")
    ap.add_argument("--replay", nargs="+", metavar="FILE")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    if a.replay:
        replay(a.replay, a.mem_gb, a.timeout)
        return 0
    counts = run(a.format, a.cases, a.seed, assets=a.assets, out=a.out, mem_gb=a.mem_gb, timeout=a.timeout,
                 only=a.case, verbose=a.verbose)
    return 1 if any(counts[c] for c in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
